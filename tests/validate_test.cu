// tests/validate_test.cu: bad arguments are refused with a reason, and nothing happens.
//
// Each case builds ScanArgs inside one arena of memory and says what the call must return.
//   ArgsTest.CanImplement/<case>   can_implement alone, for all four types, on host memory (it
//                                  touches no device memory and no CUDA call): runs everywhere.
//   ArgsTest.Scan/<case>           scan() on a device arena whose every cell is poison or a
//                                  known value: it must return what can_implement returns, and
//                                  a refused call must leave every cell as it was and no CUDA
//                                  error behind. Needs a GPU.
#include <ascan/ascan.cuh>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "test_util.cuh"

namespace ascan::test {
namespace {

/// The arena: gates, tokens and out of the base case sit kSpan elements apart; the states after.
constexpr int64_t kSpan = 4096;
constexpr int64_t kGates = 0, kTokens = kSpan, kOut = 2 * kSpan, kInit = 3 * kSpan,
                  kFinal = 3 * kSpan + 512;
constexpr int64_t kArena = 4 * kSpan;

enum class Id {
  // refused: kInvalidArgument
  kNullGates,
  kNullTokens,
  kNullOut,
  kNegativeBatch,
  kNegativeChannels,
  kNegativeLength,
  kNegativeBatchStride,
  kNegativeChannelStride,
  kNegativeTimeStride,
  kChannelStrideBelowLength,
  kZeroChannelStride,
  kBatchStrideOverlapsChannels,
  kBatchStrideEqualsChannelStride,
  kExtentOverflows,
  kOutEqualsGates,
  kOutPartlyOverlapsGates,
  kOutIsTokensPlusOne,
  kOutIsTokensMinusOne,
  kFinalStateOverlapsOut,
  kFinalStateOverlapsGates,
  kFinalStatesOverlapEachOther,
  kFinalStatePartlyOverlapsInitialState,
  kInitialStateOverlapsOut,
  kNegativeStateStride,
  kPointerNotElementAligned,
  // refused: arithmetic at the edges (issue 21)
  kLengthInt64Max,
  kOutEqualsGatesLength2To62,
  kFinalStateExtentWraps,
  kFinalStateEndsPastAddressSpace,
  kPackedCountInt64Max,
  kPackedOffsetsInsideOut,
  kOutInterleavedOneOffGates,
  // accepted since time strides other than 1 are scanned by the row path
  kTimeStrideTwo,
  // accepted
  kBaseline,
  kInPlace,
  kGatesEqualTokens,
  kPaddedStrides,
  kChannelsOutsideBatch,
  kSizeOneDimsAnyStride,
  kStatesCustomLayout,
  kFinalStateEqualsInitialState,
  kEmptyBatchNullPointers,
  kEmptyChannelsNullPointers,
  kEmptyLengthNullPointers,
  kEmptyNullPointersFinalState,
  // accepted since overlap is decided exactly for arrays of the same strides (issue 21)
  kOutInOddBatchesOfGates,
  kFinalStateInterleavedWithInitialState,
};

struct ArgsCase {
  Id id;
  const char* name;
  StatusCode expected;
};

constexpr StatusCode kInvalid = StatusCode::kInvalidArgument;
constexpr StatusCode kOk = StatusCode::kSuccess;

const ArgsCase kCases[] = {
    {Id::kNullGates, "NullGates", kInvalid},
    {Id::kNullTokens, "NullTokens", kInvalid},
    {Id::kNullOut, "NullOut", kInvalid},
    {Id::kNegativeBatch, "NegativeBatch", kInvalid},
    {Id::kNegativeChannels, "NegativeChannels", kInvalid},
    {Id::kNegativeLength, "NegativeLength", kInvalid},
    {Id::kNegativeBatchStride, "NegativeBatchStride", kInvalid},
    {Id::kNegativeChannelStride, "NegativeChannelStride", kInvalid},
    {Id::kNegativeTimeStride, "NegativeTimeStride", kInvalid},
    {Id::kChannelStrideBelowLength, "ChannelStrideBelowLength", kInvalid},
    {Id::kZeroChannelStride, "ZeroChannelStride", kInvalid},
    {Id::kBatchStrideOverlapsChannels, "BatchStrideOverlapsChannels", kInvalid},
    {Id::kBatchStrideEqualsChannelStride, "BatchStrideEqualsChannelStride", kInvalid},
    {Id::kExtentOverflows, "ExtentOverflows", kInvalid},
    {Id::kOutEqualsGates, "OutEqualsGates", kInvalid},
    {Id::kOutPartlyOverlapsGates, "OutPartlyOverlapsGates", kInvalid},
    {Id::kOutIsTokensPlusOne, "OutIsTokensPlusOne", kInvalid},
    {Id::kOutIsTokensMinusOne, "OutIsTokensMinusOne", kInvalid},
    {Id::kFinalStateOverlapsOut, "FinalStateOverlapsOut", kInvalid},
    {Id::kFinalStateOverlapsGates, "FinalStateOverlapsGates", kInvalid},
    {Id::kFinalStatesOverlapEachOther, "FinalStatesOverlapEachOther", kInvalid},
    {Id::kFinalStatePartlyOverlapsInitialState, "FinalStatePartlyOverlapsInitialState", kInvalid},
    {Id::kInitialStateOverlapsOut, "InitialStateOverlapsOut", kInvalid},
    {Id::kNegativeStateStride, "NegativeStateStride", kInvalid},
    {Id::kPointerNotElementAligned, "PointerNotElementAligned", kInvalid},
    {Id::kLengthInt64Max, "LengthInt64Max", kInvalid},
    {Id::kOutEqualsGatesLength2To62, "OutEqualsGatesLength2To62", kInvalid},
    {Id::kFinalStateExtentWraps, "FinalStateExtentWraps", kInvalid},
    {Id::kFinalStateEndsPastAddressSpace, "FinalStateEndsPastAddressSpace", kInvalid},
    {Id::kPackedCountInt64Max, "PackedCountInt64Max", kInvalid},
    {Id::kPackedOffsetsInsideOut, "PackedOffsetsInsideOut", kInvalid},
    {Id::kOutInterleavedOneOffGates, "OutInterleavedOneOffGates", kInvalid},
    {Id::kTimeStrideTwo, "TimeStrideTwo", kOk},
    {Id::kBaseline, "Baseline", kOk},
    {Id::kInPlace, "InPlace", kOk},
    {Id::kGatesEqualTokens, "GatesEqualTokens", kOk},
    {Id::kPaddedStrides, "PaddedStrides", kOk},
    {Id::kChannelsOutsideBatch, "ChannelsOutsideBatch", kOk},
    {Id::kSizeOneDimsAnyStride, "SizeOneDimsAnyStride", kOk},
    {Id::kStatesCustomLayout, "StatesCustomLayout", kOk},
    {Id::kFinalStateEqualsInitialState, "FinalStateEqualsInitialState", kOk},
    {Id::kEmptyBatchNullPointers, "EmptyBatchNullPointers", kOk},
    {Id::kEmptyChannelsNullPointers, "EmptyChannelsNullPointers", kOk},
    {Id::kEmptyLengthNullPointers, "EmptyLengthNullPointers", kOk},
    {Id::kEmptyNullPointersFinalState, "EmptyNullPointersFinalState", kOk},
    {Id::kOutInOddBatchesOfGates, "OutInOddBatchesOfGates", kOk},
    {Id::kFinalStateInterleavedWithInitialState, "FinalStateInterleavedWithInitialState", kOk},
};

/// Packed offsets for the packed cases (host memory: never read, every such case is refused).
const int64_t kOffsets64[3] = {0, 50, 100};

/// The arguments of case `id` inside `arena` (kArena elements). The base case is a packed
/// (2, 3, 100) scan with gates, tokens, out and both states in separate parts of the arena; each
/// case changes one thing.
template <class T>
ScanArgs<T> make_args(Id id, T* arena) {
  ScanArgs<T> a;
  a.gates = arena + kGates;
  a.tokens = arena + kTokens;
  a.out = arena + kOut;
  a.shape = time_contiguous(2, 3, 100);
  Shape& s = a.shape;
  switch (id) {
    case Id::kNullGates:
      a.gates = nullptr;
      break;
    case Id::kNullTokens:
      a.tokens = nullptr;
      break;
    case Id::kNullOut:
      a.out = nullptr;
      break;
    case Id::kNegativeBatch:
      s.batch = -1;
      break;
    case Id::kNegativeChannels:
      s.channels = -3;
      break;
    case Id::kNegativeLength:
      s.length = -100;
      break;
    case Id::kNegativeBatchStride:
      s.batch_stride = -300;
      break;
    case Id::kNegativeChannelStride:
      s.channel_stride = -100;
      break;
    case Id::kNegativeTimeStride:
      s.time_stride = -1;
      break;
    case Id::kChannelStrideBelowLength:
      s.channel_stride = 99;
      s.batch_stride = 3 * 99;
      break;
    case Id::kZeroChannelStride:
      s.channel_stride = 0;
      break;
    case Id::kBatchStrideOverlapsChannels:
      s.batch_stride = 250;
      break;
    case Id::kBatchStrideEqualsChannelStride:
      s.batch_stride = 100;
      break;
    case Id::kExtentOverflows:
      s.batch_stride = INT64_MAX / 2;
      s.batch = 3;
      break;
    case Id::kOutEqualsGates:
      a.out = arena + kGates;
      break;
    case Id::kOutPartlyOverlapsGates:
      a.out = arena + kGates + 50;
      break;
    case Id::kOutIsTokensPlusOne:
      a.out = arena + kTokens + 1;
      break;
    case Id::kOutIsTokensMinusOne:
      a.out = arena + kTokens - 1;
      break;
    case Id::kFinalStateOverlapsOut:
      a.final_state = arena + kOut + 10;
      break;
    case Id::kFinalStateOverlapsGates:
      a.final_state = arena + kGates + 599;
      break;
    case Id::kFinalStatesOverlapEachOther:
      a.final_state = arena + kFinal;
      a.state_layout = StateLayout{3, 0};  // every channel of a batch on one cell
      break;
    case Id::kFinalStatePartlyOverlapsInitialState:
      a.initial_state = arena + kInit;
      a.final_state = arena + kInit + 1;
      break;
    case Id::kInitialStateOverlapsOut:
      a.initial_state = arena + kOut + 5;
      break;
    case Id::kNegativeStateStride:
      a.final_state = arena + kFinal + 64;
      a.state_layout = StateLayout{-3, 1};
      break;
    case Id::kPointerNotElementAligned:
      a.tokens = reinterpret_cast<const T*>(reinterpret_cast<const char*>(arena + kTokens) + 1);
      break;
    case Id::kLengthInt64Max:  // 2^63 - 1 elements: no array of them fits 64-bit indexing
      s = time_contiguous(1, 1, INT64_MAX);
      break;
    case Id::kOutEqualsGatesLength2To62:  // its byte extent, 2^64 for float, wraps uintptr_t
      s = time_contiguous(1, 1, int64_t{1} << 62);
      a.out = arena + kGates;
      break;
    case Id::kFinalStateExtentWraps:  // batch b's states 2^62 elements apart: past 2^63 bytes
      a.final_state = arena + kFinal;
      a.state_layout = StateLayout{int64_t{1} << 62, 1};
      break;
    case Id::kFinalStateEndsPastAddressSpace:  // six states from the top element of memory on
      a.final_state = reinterpret_cast<T*>(UINTPTR_MAX - sizeof(T) + 1);
      break;
    case Id::kPackedCountInt64Max:  // count + 1 offsets: not a 64-bit count
      s = time_contiguous(1, 3, 100);
      a.packed = packed(kOffsets64, INT64_MAX);
      break;
    case Id::kPackedOffsetsInsideOut:  // the kernel would read offsets that it writes
      s = time_contiguous(1, 3, 100);
      a.packed = packed(reinterpret_cast<const int64_t*>(arena + kOut + 16), 2);
      break;
    case Id::kOutInterleavedOneOffGates:  // as OutInOddBatchesOfGates, one element early
      s.batch_stride = 2 * 300;
      a.out = arena + kGates + 299;
      break;
    case Id::kOutInOddBatchesOfGates:  // gates the even batches of a (4, 3, 100), out the odd
      s.batch_stride = 2 * 300;
      a.out = arena + kGates + 300;
      break;
    case Id::kFinalStateInterleavedWithInitialState:  // (b, c) at 6b + 2c: h0 even, final odd
      a.initial_state = arena + kInit;
      a.final_state = arena + kInit + 1;
      a.state_layout = StateLayout{6, 2};
      break;
    case Id::kTimeStrideTwo:
      s.time_stride = 2;
      s.channel_stride = 200;
      s.batch_stride = 600;
      break;
    case Id::kBaseline:
      a.initial_state = arena + kInit;
      a.final_state = arena + kFinal;
      break;
    case Id::kInPlace:
      a.out = arena + kTokens;
      break;
    case Id::kGatesEqualTokens:
      a.tokens = a.gates;
      break;
    case Id::kPaddedStrides:
      s.channel_stride = 128;
      s.batch_stride = 3 * 128 + 7;
      break;
    case Id::kChannelsOutsideBatch:
      s.batch_stride = 100;
      s.channel_stride = 200;
      break;
    case Id::kSizeOneDimsAnyStride:
      s.batch = 1;
      s.batch_stride = 0;
      s.channels = 1;
      s.channel_stride = 0;
      break;
    case Id::kStatesCustomLayout:
      a.initial_state = arena + kInit;
      a.final_state = arena + kFinal;
      a.state_layout = StateLayout{7, 2};
      break;
    case Id::kFinalStateEqualsInitialState:
      a.initial_state = arena + kInit;
      a.final_state = arena + kInit;
      break;
    case Id::kEmptyBatchNullPointers:
      a = {};
      a.shape = time_contiguous(0, 3, 100);
      break;
    case Id::kEmptyChannelsNullPointers:
      a = {};
      a.shape = time_contiguous(2, 0, 100);
      break;
    case Id::kEmptyLengthNullPointers:
      a = {};
      a.shape = time_contiguous(2, 3, 0);
      break;
    case Id::kEmptyNullPointersFinalState:
      a.gates = a.tokens = nullptr;
      a.out = nullptr;
      a.shape = time_contiguous(2, 3, 0);
      a.final_state = arena + kFinal;
      break;
  }
  return a;
}

std::string case_name(const ::testing::TestParamInfo<ArgsCase>& info) { return info.param.name; }

const char* code_name(StatusCode c) {
  switch (c) {
    case StatusCode::kSuccess:
      return "kSuccess";
    case StatusCode::kInvalidArgument:
      return "kInvalidArgument";
    case StatusCode::kNotSupported:
      return "kNotSupported";
    case StatusCode::kCudaError:
      return "kCudaError";
  }
  return "?";
}

::testing::AssertionResult has_code(const Status& s, StatusCode want) {
  const bool readable = s.message != nullptr && std::strlen(s.message) > 0;
  if (s.code == want && (want == StatusCode::kSuccess || readable))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "got " << code_name(s.code) << " (\"" << (s.message ? s.message : "(null)")
         << "\"), want " << code_name(want) << (readable ? "" : " with a readable message");
}

class ArgsTest : public ::testing::TestWithParam<ArgsCase> {};
class ArgsGpuTest : public RequiresGpu<::testing::TestWithParam<ArgsCase>> {};

/// can_implement alone: host memory stands in for device memory, as it never reads either.
template <class T>
void check_can_implement(const ArgsCase& c) {
  SCOPED_TRACE(type_name<T>());
  std::vector<T> arena(kArena);
  const ScanArgs<T> a = make_args<T>(c.id, arena.data());
  EXPECT_TRUE(has_code(can_implement(a), c.expected));
}

TEST_P(ArgsTest, CanImplement) {
  check_can_implement<float>(GetParam());
  check_can_implement<double>(GetParam());
  check_can_implement<__half>(GetParam());
  check_can_implement<__nv_bfloat16>(GetParam());
}

/// scan() itself: the same verdict as can_implement, no CUDA error left behind, and when refused
/// (or empty) no cell of the arena changed. The arena holds finite random values (so a kernel that
/// ran would write new numbers) with the 1024 cells from out on poisoned.
template <class T>
void check_scan(const ArgsCase& c, bool own_stream) {
  SCOPED_TRACE(type_name<T>());
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(c.name, seed));
  Rng rng(seed);
  std::vector<T> before(kArena);
  for (T& v : before) v = from_double<T>(rng.uniform(-1.0, 1.0));
  DeviceBuffer<T> arena;
  ASSERT_TRUE(arena.allocate(kArena));
  const ScanArgs<T> a = make_args<T>(c.id, arena.get());
  if (a.out != nullptr) {
    const int64_t o = a.out - arena.get();
    for (int64_t i = std::max<int64_t>(o, 0); i < std::min<int64_t>(o + 1024, kArena); ++i)
      before[i] = poison_value<T>();
  }
  ASSERT_TRUE(arena.upload(before));
  Stream stream;
  if (own_stream) ASSERT_TRUE(stream.create());

  const Status v = can_implement(a);
  EXPECT_TRUE(has_code(v, c.expected));
  const Status s = scan(a, stream.get());
  EXPECT_EQ(s.code, v.code) << "scan and can_implement disagree: scan says \"" << s.message
                            << "\", can_implement \"" << v.message << "\"";
  EXPECT_TRUE(has_code(s, c.expected));
  // The other entry points judge alike; a refused size query leaves workspace_bytes alone.
  size_t bytes = 12345;
  const Status q = scan(a, nullptr, bytes, stream.get());
  EXPECT_EQ(q.code, v.code) << "the size query says \"" << q.message << "\"";
  if (!v.ok()) EXPECT_EQ(bytes, 12345u) << "a refused size query wrote workspace_bytes";
  const Status m = scan(a, malloc_async, stream.get());
  EXPECT_EQ(m.code, v.code) << "the malloc_async entry point says \"" << m.message << "\"";
  ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after scan)"));
  EXPECT_TRUE(no_pending_cuda_error());
  // A refused call, and an empty one, does nothing.
  if (c.expected == StatusCode::kSuccess && !a.shape.empty()) return;

  std::vector<T> after;
  ASSERT_TRUE(arena.download(after));
  int64_t changed = 0, first = -1;
  for (int64_t i = 0; i < kArena; ++i)
    if (!bitwise_equal(after[i], before[i]) && changed++ == 0) first = i;
  EXPECT_EQ(changed, 0) << "the scan wrote " << changed << " cells; first at arena[" << first
                        << "]";
}

TEST_P(ArgsGpuTest, Scan) {
  check_scan<float>(GetParam(), false);
  check_scan<double>(GetParam(), true);
  check_scan<__half>(GetParam(), false);
  check_scan<__nv_bfloat16>(GetParam(), true);
}

INSTANTIATE_TEST_SUITE_P(Validate, ArgsTest, ::testing::ValuesIn(kCases), case_name);
INSTANTIATE_TEST_SUITE_P(Validate, ArgsGpuTest, ::testing::ValuesIn(kCases), case_name);

/// A refused call followed by a good one: the refusal left nothing that spoils the next call.
class AfterRefusalTest : public RequiresGpu<> {};

TEST_F(AfterRefusalTest, NextScanSucceeds) {
  DeviceBuffer<float> g, x, o;
  for (DeviceBuffer<float>* b : {&g, &x, &o}) ASSERT_TRUE(b->allocate(64));
  std::vector<float> ones(64, 1.0f);
  ASSERT_TRUE(g.upload(ones));
  ASSERT_TRUE(x.upload(ones));
  ScanArgs<float> a;
  a.gates = g.get();
  a.tokens = x.get();
  a.out = g.get();  // out == gates: refused
  a.shape = time_contiguous(1, 1, 64);
  EXPECT_EQ(scan(a).code, StatusCode::kInvalidArgument);
  a.out = o.get();
  const Status s = scan(a);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
  ASSERT_TRUE(no_pending_cuda_error());
  std::vector<float> out;
  ASSERT_TRUE(o.download(out));
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i], static_cast<float>(i + 1)) << "at " << i;
}

}  // namespace
}  // namespace ascan::test
