// Tests for ascan/reference/scan_reference.hpp: the tree scan against the sequential loop, the
// combine order, exact hand-computed cases, and the backward reference against central finite
// differences of the forward reference. Plain C++; no CUDA.
#include "ascan/reference/scan_reference.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

using ascan::reference::compose;
using ascan::reference::Pair;
using ascan::reference::sequential_scan;
using ascan::reference::sequential_scan_backward;
using ascan::reference::tree_scan;

enum class Gates { kUniform, kOnes, kZeros, kNegative, kNearOne };

const char* name(Gates g) {
  switch (g) {
    case Gates::kUniform:
      return "uniform(0,1)";
    case Gates::kOnes:
      return "ones (cumsum)";
    case Gates::kZeros:
      return "zeros";
    case Gates::kNegative:
      return "negative(-1,0)";
    case Gates::kNearOne:
      return "near one";
  }
  return "?";
}

uint64_t fresh_seed() {
  std::random_device rd;
  return (uint64_t{rd()} << 32) ^ rd();
}

struct Inputs {
  std::vector<double> a, b;
};

Inputs make_inputs(int64_t n, Gates g, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u01(0.0, 1.0), u11(-1.0, 1.0);
  Inputs in{std::vector<double>(n), std::vector<double>(n)};
  for (int64_t t = 0; t < n; ++t) {
    switch (g) {
      case Gates::kUniform:
        in.a[t] = u01(rng);
        break;
      case Gates::kOnes:
        in.a[t] = 1.0;
        break;
      case Gates::kZeros:
        in.a[t] = 0.0;
        break;
      case Gates::kNegative:
        in.a[t] = -u01(rng);
        break;
      case Gates::kNearOne:
        in.a[t] = 1.0 - 1e-4 * u01(rng);
        break;
    }
    in.b[t] = u11(rng);
  }
  return in;
}

// The natural error scale of x[t]: the recurrence run on |a|, |b|, |h0|. Rounding in any
// evaluation order is bounded by a small multiple of eps times this, even where x[t] cancels.
std::vector<double> magnitude(const std::vector<double>& a, const std::vector<double>& b,
                              bool reverse, double h0) {
  std::vector<double> abs_a(a.size()), abs_b(b.size()), c(a.size());
  for (size_t t = 0; t < a.size(); ++t) abs_a[t] = std::fabs(a[t]), abs_b[t] = std::fabs(b[t]);
  sequential_scan(abs_a.data(), abs_b.data(), int64_t(a.size()), reverse, std::fabs(h0), c.data());
  return c;
}

// Checks got against want: relative L2 over the sequence, and per element against the scale.
template <class T>
void expect_close(const std::vector<T>& got, const std::vector<double>& want,
                  const std::vector<double>& scale, double tol) {
  double err2 = 0, ref2 = 0;
  int reported = 0;
  for (size_t t = 0; t < want.size(); ++t) {
    const double diff = static_cast<double>(got[t]) - want[t];
    err2 += diff * diff;
    ref2 += want[t] * want[t];
    if (!(std::fabs(diff) <= tol * scale[t]) && reported++ < 5)
      ADD_FAILURE() << "t=" << t << " got " << got[t] << " want " << want[t] << " scale "
                    << scale[t];
  }
  if (ref2 > 0)
    EXPECT_LE(std::sqrt(err2 / ref2), tol) << "relative L2 error";
  else
    EXPECT_EQ(err2, 0.0);
}

TEST(TreeScan, MatchesSequentialDouble) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u11(-1.0, 1.0);
  for (int64_t n : {1, 2, 3, 5, 31, 32, 33, 127, 128, 129, 1000, 4097, 65537})
    for (Gates g :
         {Gates::kUniform, Gates::kOnes, Gates::kZeros, Gates::kNegative, Gates::kNearOne})
      for (bool reverse : {false, true})
        for (bool random_h0 : {false, true}) {
          const double h0 = random_h0 ? u11(rng) : 0.0;
          SCOPED_TRACE("n=" + std::to_string(n) + " gates=" + name(g) +
                       " reverse=" + std::to_string(reverse) + " h0=" + std::to_string(h0));
          const Inputs in = make_inputs(n, g, rng);
          std::vector<double> want(n), got(n);
          sequential_scan(in.a.data(), in.b.data(), n, reverse, h0, want.data());
          tree_scan(in.a.data(), in.b.data(), n, reverse, h0, got.data());
          expect_close(got, want, magnitude(in.a, in.b, reverse, h0), 1e-12);
        }
}

TEST(TreeScan, FloatMatchesSequentialDouble) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t n = 1000;
  for (bool reverse : {false, true}) {
    SCOPED_TRACE("reverse=" + std::to_string(reverse));
    const Inputs in = make_inputs(n, Gates::kUniform, rng);
    const double h0 = 0.5;
    std::vector<float> af(in.a.begin(), in.a.end()), bf(in.b.begin(), in.b.end()), got(n);
    std::vector<double> want(n);
    // The reference sees the float-rounded inputs, so only the scan's own rounding is measured.
    sequential_scan(af.data(), bf.data(), n, reverse, h0, want.data());
    tree_scan(af.data(), bf.data(), n, reverse, float(h0), got.data());
    const std::vector<double> a64(af.begin(), af.end()), b64(bf.begin(), bf.end());
    expect_close(got, want, magnitude(a64, b64, reverse, h0), 1e-5);
  }
}

// compose is not commutative, and a scan that swapped operands gives a different answer.
TEST(TreeScan, NonCommutative) {
  const Pair<double> p{2, 1}, q{3, 5};  // (a, b) for t = 0, 1
  const Pair<double> pq = compose(p, q), qp = compose(q, p);
  EXPECT_EQ(pq.a, 6);
  EXPECT_EQ(pq.b, 8);   // 3 * 1 + 5
  EXPECT_EQ(qp.b, 11);  // 2 * 5 + 1: the swapped order
  EXPECT_NE(pq.b, qp.b);

  const double a[] = {2, 3}, b[] = {1, 5};
  double x[2];
  // Forward, h0 = 0: x0 = 1, x1 = 3*1 + 5 = 8 (a swapped combine would give x1 = 11).
  tree_scan(a, b, 2, false, 0.0, x);
  EXPECT_EQ(x[0], 1);
  EXPECT_EQ(x[1], 8);
  // Reverse, h0 = 0: x1 = 5, x0 = 2*5 + 1 = 11 (a swapped combine would give x0 = 3*1 + 5 = 8).
  tree_scan(a, b, 2, true, 0.0, x);
  EXPECT_EQ(x[1], 5);
  EXPECT_EQ(x[0], 11);
  // With h0 = 2: forward x = {5, 20}; reverse x = {23, 11}.
  tree_scan(a, b, 2, false, 2.0, x);
  EXPECT_EQ(x[0], 5);
  EXPECT_EQ(x[1], 20);
  tree_scan(a, b, 2, true, 2.0, x);
  EXPECT_EQ(x[1], 11);
  EXPECT_EQ(x[0], 23);

  // n = 3 pads to 4 with the identity.
  const double a3[] = {2, 3, 4}, b3[] = {1, 5, -2};
  double x3[3];
  tree_scan(a3, b3, 3, false, 0.0, x3);  // 1, 3*1+5 = 8, 4*8-2 = 30
  EXPECT_EQ(x3[0], 1);
  EXPECT_EQ(x3[1], 8);
  EXPECT_EQ(x3[2], 30);
  tree_scan(a3, b3, 3, true, 0.0, x3);  // x2 = -2, x1 = 3*(-2)+5 = -1, x0 = 2*(-1)+1 = -1
  EXPECT_EQ(x3[2], -2);
  EXPECT_EQ(x3[1], -1);
  EXPECT_EQ(x3[0], -1);

  // n = 4: the down-sweep forms element 3's exclusive prefix as compose(parent prefix = pairs 0..1,
  // left sum = pair 2), both non-trivial; swapping them would give forward x3 = 7, not -27.
  const double a4[] = {2, 3, 4, -1}, b4[] = {1, 5, -2, 3};
  double x4[4];
  tree_scan(a4, b4, 4, false, 0.0, x4);  // 1, 8, 30, -30+3 = -27
  EXPECT_EQ(x4[0], 1);
  EXPECT_EQ(x4[1], 8);
  EXPECT_EQ(x4[2], 30);
  EXPECT_EQ(x4[3], -27);
  tree_scan(a4, b4, 4, true, 0.0, x4);  // x3 = 3, x2 = 4*3-2 = 10, x1 = 35, x0 = 71
  EXPECT_EQ(x4[3], 3);
  EXPECT_EQ(x4[2], 10);
  EXPECT_EQ(x4[1], 35);
  EXPECT_EQ(x4[0], 71);
}

// Small integer gates and tokens keep every value an exact double, so any operand-order slip
// at any level of the tree shows as an inexact mismatch.
TEST(TreeScan, ExactOnIntegers) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> gate(-2, 2), token(-3, 3);
  for (int64_t n = 1; n <= 40; ++n)
    for (bool reverse : {false, true}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " reverse=" + std::to_string(reverse));
      std::vector<double> a(n), b(n), want(n), got(n);
      for (int64_t t = 0; t < n; ++t) a[t] = gate(rng), b[t] = token(rng);
      sequential_scan(a.data(), b.data(), n, reverse, 1.0, want.data());
      tree_scan(a.data(), b.data(), n, reverse, 1.0, got.data());
      for (int64_t t = 0; t < n; ++t) ASSERT_EQ(got[t], want[t]) << "t=" << t;
    }
}

TEST(SequentialScan, HandComputed) {
  const double a[] = {0.5, 2, -1}, b[] = {1, 1, 3};
  double x[3];
  // Forward, h0 = 2: 0.5*2+1 = 2, 2*2+1 = 5, -5+3 = -2.
  sequential_scan(a, b, 3, false, 2.0, x);
  EXPECT_EQ(x[0], 2);
  EXPECT_EQ(x[1], 5);
  EXPECT_EQ(x[2], -2);
  // Reverse, h0 = 2: x2 = -2+3 = 1, x1 = 2*1+1 = 3, x0 = 0.5*3+1 = 2.5.
  sequential_scan(a, b, 3, true, 2.0, x);
  EXPECT_EQ(x[2], 1);
  EXPECT_EQ(x[1], 3);
  EXPECT_EQ(x[0], 2.5);
  // Forward, h0 = 0: 1, 3, 0.
  sequential_scan(a, b, 3, false, 0.0, x);
  EXPECT_EQ(x[0], 1);
  EXPECT_EQ(x[1], 3);
  EXPECT_EQ(x[2], 0);

  // The converting overload: float and int inputs, run in double.
  const float af[] = {0.5f, 2, -1}, bf[] = {1, 1, 3};
  sequential_scan(af, bf, 3, true, 2.0, x);
  EXPECT_EQ(x[0], 2.5);
  const int ai[] = {2, 3}, bi[] = {1, 5};
  sequential_scan(ai, bi, 2, false, 0.0, x);
  EXPECT_EQ(x[1], 8);
}

TEST(Scans, EmptyIsNoOp) {
  std::vector<double> x(4, 42.0);
  const double* none = nullptr;
  const float* none_f = nullptr;
  sequential_scan(none, none, 0, false, 1.0, x.data());
  sequential_scan(none_f, none_f, 0, true, 1.0, x.data());
  tree_scan(none, none, 0, false, 1.0, x.data());
  tree_scan(none, none, 0, true, 1.0, x.data());
  for (double v : x) EXPECT_EQ(v, 42.0);
}

// The scalar loss L = sum_t w[t] * x[t] + wT * final state, through the double forward
// reference; its gradient wrt x is g = w, and wrt the final state gT = wT.
double loss(const std::vector<double>& a, const std::vector<double>& b, bool reverse, double h0,
            const std::vector<double>& w, double wT) {
  const int64_t n = int64_t(a.size());
  std::vector<double> x(n);
  sequential_scan(a.data(), b.data(), n, reverse, h0, x.data());
  double l = 0;
  for (int64_t t = 0; t < n; ++t) l += w[t] * x[t];
  return l + wT * (n == 0 ? h0 : x[reverse ? 0 : n - 1]);
}

// Central difference of `f` at v: (f(v + h) - f(v - h)) / 2h, h = 1e-6 * max(1, |v|). The loss is
// multilinear in (a, b, h0), so the difference has no truncation error, only rounding.
template <class F>
double central_difference(double& v, F f) {
  const double v0 = v, h = 1e-6 * std::max(1.0, std::fabs(v0));
  v = v0 + h;
  const double up = f();
  v = v0 - h;
  const double down = f();
  v = v0;
  return (up - down) / (2 * h);
}

void expect_grad(double got, double fd, const char* what, int64_t t) {
  EXPECT_NEAR(got, fd, 1e-6 * std::max(1.0, std::fabs(fd))) << what << " t=" << t;
}

TEST(SequentialScanBackward, MatchesFiniteDifferences) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u11(-1.0, 1.0);
  for (int64_t n : {1, 2, 3, 17, 64})
    for (Gates gates : {Gates::kUniform, Gates::kNegative, Gates::kOnes, Gates::kZeros})
      for (bool reverse : {false, true}) {
        Inputs in = make_inputs(n, gates, rng);
        double h0 = u11(rng);
        const double wT = u11(rng);
        std::vector<double> w(n);
        for (double& v : w) v = u11(rng);
        SCOPED_TRACE("n=" + std::to_string(n) + " gates=" + name(gates) +
                     " reverse=" + std::to_string(reverse));

        std::vector<double> x(n), da(n), db(n);
        double dh0 = 0;
        sequential_scan(in.a.data(), in.b.data(), n, reverse, h0, x.data());
        sequential_scan_backward(in.a.data(), x.data(), w.data(), n, reverse, h0, wT, da.data(),
                                 db.data(), &dh0);

        const auto l = [&] { return loss(in.a, in.b, reverse, h0, w, wT); };
        for (int64_t t = 0; t < n; ++t) {
          expect_grad(da[t], central_difference(in.a[t], l), "da", t);
          expect_grad(db[t], central_difference(in.b[t], l), "db", t);
        }
        expect_grad(dh0, central_difference(h0, l), "dh0", -1);
      }
}

// a = {0.5, 2, -1}, b = {1, 1, 3}, h0 = 2, g = {1, -1, 2}, gT = 0.5: every value is exact.
TEST(SequentialScanBackward, HandComputed) {
  const double a[] = {0.5, 2, -1}, b[] = {1, 1, 3}, g[] = {1, -1, 2};
  double x[3], da[3], db[3], dh0 = 0;

  // Forward: x = {2, 5, -2}. d2 = 2 + 0.5 = 2.5, d1 = -1 + (-1)(2.5) = -3.5,
  // d0 = 1 + 2(-3.5) = -6. da = {d0 h0, d1 x0, d2 x1} = {-12, -7, 12.5}; dh0 = 0.5(-6) = -3.
  sequential_scan(a, b, 3, false, 2.0, x);
  sequential_scan_backward(a, x, g, 3, false, 2.0, 0.5, da, db, &dh0);
  EXPECT_EQ(db[0], -6);
  EXPECT_EQ(db[1], -3.5);
  EXPECT_EQ(db[2], 2.5);
  EXPECT_EQ(da[0], -12);
  EXPECT_EQ(da[1], -7);
  EXPECT_EQ(da[2], 12.5);
  EXPECT_EQ(dh0, -3);

  // Reverse: x = {2.5, 3, 1}, final state x0. d0 = 1 + 0.5 = 1.5, d1 = -1 + 0.5(1.5) = -0.25,
  // d2 = 2 + 2(-0.25) = 1.5. da = {d0 x1, d1 x2, d2 h0} = {4.5, -0.25, 3}; dh0 = -1(1.5) = -1.5.
  sequential_scan(a, b, 3, true, 2.0, x);
  sequential_scan_backward(a, x, g, 3, true, 2.0, 0.5, da, db, &dh0);
  EXPECT_EQ(db[0], 1.5);
  EXPECT_EQ(db[1], -0.25);
  EXPECT_EQ(db[2], 1.5);
  EXPECT_EQ(da[0], 4.5);
  EXPECT_EQ(da[1], -0.25);
  EXPECT_EQ(da[2], 3);
  EXPECT_EQ(dh0, -1.5);

  // n = 1 forward, a = 3, h0 = 4, g = 2, gT = 1: d = 3, da = 12, db = 3, dh0 = 9.
  const double a1[] = {3}, x1[] = {13}, g1[] = {2};
  sequential_scan_backward(a1, x1, g1, 1, false, 4.0, 1.0, da, db, &dh0);
  EXPECT_EQ(da[0], 12);
  EXPECT_EQ(db[0], 3);
  EXPECT_EQ(dh0, 9);

  // The converting overload (float and int inputs) gives the same numbers; dh0 may be null.
  const float af[] = {0.5f, 2, -1}, xf[] = {2.5f, 3, 1}, gf[] = {1, -1, 2};
  sequential_scan_backward(af, xf, gf, 3, true, 2.0, 0.5, da, db, &dh0);
  EXPECT_EQ(da[0], 4.5);
  EXPECT_EQ(db[1], -0.25);
  EXPECT_EQ(dh0, -1.5);
  const int ai[] = {2, 3}, xi[] = {1, 8}, gi[] = {1, 1};  // forward x of b = {1, 5}, h0 = 0
  sequential_scan_backward(ai, xi, gi, 2, false, 0.0, 0.0, da, db, nullptr);
  EXPECT_EQ(db[0], 4);  // 1 + 3 * 1
  EXPECT_EQ(db[1], 1);
  EXPECT_EQ(da[0], 0);  // d0 * h0
  EXPECT_EQ(da[1], 1);  // d1 * x0
}

// da over g or x and db over g or a (the documented aliasing) give the unaliased result.
TEST(SequentialScanBackward, InPlace) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t n = 33;
  for (bool reverse : {false, true}) {
    SCOPED_TRACE("reverse=" + std::to_string(reverse));
    const Inputs in = make_inputs(n, Gates::kUniform, rng);
    std::vector<double> x(n), g = in.b, da(n), db(n);  // any values serve as g
    double dh0 = 0, dh0_alias = 0;
    sequential_scan(in.a.data(), in.b.data(), n, reverse, 0.25, x.data());
    sequential_scan_backward(in.a.data(), x.data(), g.data(), n, reverse, 0.25, -0.5, da.data(),
                             db.data(), &dh0);

    std::vector<double> g2 = g, db2(n);  // da over g
    sequential_scan_backward(in.a.data(), x.data(), g2.data(), n, reverse, 0.25, -0.5, g2.data(),
                             db2.data(), &dh0_alias);
    EXPECT_EQ(g2, da);
    EXPECT_EQ(db2, db);
    EXPECT_EQ(dh0_alias, dh0);

    std::vector<double> x2 = x, a2 = in.a;  // da over x, db over a
    sequential_scan_backward(a2.data(), x2.data(), g.data(), n, reverse, 0.25, -0.5, x2.data(),
                             a2.data(), &dh0_alias);
    EXPECT_EQ(x2, da);
    EXPECT_EQ(a2, db);
    EXPECT_EQ(dh0_alias, dh0);
  }
}

// With no steps the final state is h0, so dh0 = gT; nothing else is read or written.
TEST(SequentialScanBackward, EmptyPassesFinalGradientToH0) {
  std::vector<double> da(2, 42.0), db(2, 42.0);
  const double* none = nullptr;
  const float* none_f = nullptr;
  double dh0 = 0;
  sequential_scan_backward(none, none, none, 0, false, 1.0, 0.75, da.data(), db.data(), &dh0);
  EXPECT_EQ(dh0, 0.75);
  dh0 = 0;
  sequential_scan_backward(none_f, none_f, none_f, 0, true, 1.0, -2.0, da.data(), db.data(), &dh0);
  EXPECT_EQ(dh0, -2.0);
  sequential_scan_backward(none, none, none, 0, true, 1.0, 3.0, da.data(), db.data(), nullptr);
  for (double v : da) EXPECT_EQ(v, 42.0);
  for (double v : db) EXPECT_EQ(v, 42.0);
}

}  // namespace
