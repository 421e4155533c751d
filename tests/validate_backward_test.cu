// tests/validate_backward_test.cu: bad arguments to scan_backward are refused with a reason, and
// nothing happens.
//
// Each case builds ScanBackwardArgs inside one arena of memory and says what the call must
// return.
//   BackwardArgsTest.CanImplement/<case>   can_implement alone, for all four types, on host
//                                          memory (it touches no device memory and no CUDA call):
//                                          runs everywhere.
//   BackwardArgsGpuTest.ScanBackward/<case> scan_backward() on a device arena whose every cell is
//                                          poison or a known value: it must return what
//                                          can_implement returns, and a refused (or empty) call
//                                          must leave every cell as it was and no CUDA error
//                                          behind. Needs a GPU.
// That the allowed aliasings are also numerically right is checked in scan_backward_test.cu
// (SmallInPlace, InPlace, SmallStates).
#include <ascan/ascan.cuh>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "test_util.cuh"

namespace ascan::test {
namespace {

/// The arena: the five sequence arrays of the base case sit kSpan elements apart; the states
/// (initial_state, grad_final_state, grad_initial_state) after them.
constexpr int64_t kSpan = 4096;
constexpr int64_t kGates = 0, kStates = kSpan, kGradOut = 2 * kSpan, kGradGates = 3 * kSpan,
                  kGradTokens = 4 * kSpan, kInit = 5 * kSpan, kGradFinal = 5 * kSpan + 512,
                  kGradInit = 5 * kSpan + 1024;
constexpr int64_t kArena = 6 * kSpan;

enum class Id {
  // refused: kInvalidArgument
  kNullGates,
  kNullStates,
  kNullGradOut,
  kNullGradGates,
  kNullGradTokens,
  kNegativeBatch,
  kNegativeChannels,
  kNegativeLength,
  kNegativeBatchStride,
  kNegativeChannelStride,
  kNegativeTimeStride,
  kChannelStrideBelowLength,
  kZeroChannelStride,
  kBatchStrideOverlapsChannels,
  kExtentOverflows,
  kStatesNotElementAligned,
  kGradGatesNotElementAligned,
  kGradGatesEqualsGates,
  kGradGatesPartlyOverlapsGates,
  kGradTokensEqualsGates,
  kGradGatesIsGradOutPlusOne,
  kGradGatesIsGradOutMinusOne,
  kGradGatesPartlyOverlapsStates,
  kGradTokensEqualsStates,
  kGradTokensPartlyOverlapsStates,
  kGradTokensIsGradOutPlusOne,
  kGradTokensEqualsGradGates,
  kGradTokensPartlyOverlapsGradGates,
  kBothOntoGradOut,
  kGradInitialStateOverlapsGates,
  kGradInitialStateOverlapsStates,
  kGradInitialStateOverlapsGradOut,
  kGradInitialStateOverlapsGradGates,
  kGradInitialStateOverlapsGradTokens,
  kGradInitialStatePartlyOverlapsInitialState,
  kGradInitialStatePartlyOverlapsGradFinalState,
  kGradInitialStatesOverlapEachOther,
  kNegativeStateStride,
  kStatePointerNotElementAligned,
  kInitialStateOverlapsGradGates,
  kInitialStateOverlapsGradTokens,
  kGradFinalStateOverlapsGradGates,
  // refused: arithmetic at the edges (issue 21)
  kLengthInt64Max,
  kGradInitialStateExtentWraps,
  kGradInitialStateEndsPastAddressSpace,
  kPackedCountInt64Max,
  kPackedOffsetsInsideGradTokens,
  kGradHalvesOneOff,
  // accepted since time strides other than 1 are scanned by the row path
  kTimeStrideTwo,
  // accepted
  kBaseline,
  kNoStates,
  kGradGatesEqualsGradOut,
  kGradGatesEqualsStates,
  kGradTokensEqualsGradOut,
  kGradGatesEqualsStatesGradTokensEqualsGradOut,
  kGradInitialStateEqualsInitialState,
  kGradInitialStateEqualsGradFinalState,
  kAllStatesEqual,
  kInputsOverlapEachOther,
  kInputStatesBroadcast,
  kPaddedStrides,
  kChannelsOutsideBatch,
  kSizeOneDimsAnyStride,
  kStatesCustomLayout,
  kEmptyBatchNullPointers,
  kEmptyChannelsNullPointers,
  kEmptyLengthNullPointers,
  kEmptyNullPointersWithStates,
  // accepted since overlap is decided exactly for arrays of the same strides (issue 21)
  kGradHalvesOfOneBuffer,
  kGradInitialStateInterleavedWithInitialState,
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
    {Id::kNullStates, "NullStates", kInvalid},
    {Id::kNullGradOut, "NullGradOut", kInvalid},
    {Id::kNullGradGates, "NullGradGates", kInvalid},
    {Id::kNullGradTokens, "NullGradTokens", kInvalid},
    {Id::kNegativeBatch, "NegativeBatch", kInvalid},
    {Id::kNegativeChannels, "NegativeChannels", kInvalid},
    {Id::kNegativeLength, "NegativeLength", kInvalid},
    {Id::kNegativeBatchStride, "NegativeBatchStride", kInvalid},
    {Id::kNegativeChannelStride, "NegativeChannelStride", kInvalid},
    {Id::kNegativeTimeStride, "NegativeTimeStride", kInvalid},
    {Id::kChannelStrideBelowLength, "ChannelStrideBelowLength", kInvalid},
    {Id::kZeroChannelStride, "ZeroChannelStride", kInvalid},
    {Id::kBatchStrideOverlapsChannels, "BatchStrideOverlapsChannels", kInvalid},
    {Id::kExtentOverflows, "ExtentOverflows", kInvalid},
    {Id::kStatesNotElementAligned, "StatesNotElementAligned", kInvalid},
    {Id::kGradGatesNotElementAligned, "GradGatesNotElementAligned", kInvalid},
    {Id::kGradGatesEqualsGates, "GradGatesEqualsGates", kInvalid},
    {Id::kGradGatesPartlyOverlapsGates, "GradGatesPartlyOverlapsGates", kInvalid},
    {Id::kGradTokensEqualsGates, "GradTokensEqualsGates", kInvalid},
    {Id::kGradGatesIsGradOutPlusOne, "GradGatesIsGradOutPlusOne", kInvalid},
    {Id::kGradGatesIsGradOutMinusOne, "GradGatesIsGradOutMinusOne", kInvalid},
    {Id::kGradGatesPartlyOverlapsStates, "GradGatesPartlyOverlapsStates", kInvalid},
    {Id::kGradTokensEqualsStates, "GradTokensEqualsStates", kInvalid},
    {Id::kGradTokensPartlyOverlapsStates, "GradTokensPartlyOverlapsStates", kInvalid},
    {Id::kGradTokensIsGradOutPlusOne, "GradTokensIsGradOutPlusOne", kInvalid},
    {Id::kGradTokensEqualsGradGates, "GradTokensEqualsGradGates", kInvalid},
    {Id::kGradTokensPartlyOverlapsGradGates, "GradTokensPartlyOverlapsGradGates", kInvalid},
    {Id::kBothOntoGradOut, "BothOntoGradOut", kInvalid},
    {Id::kGradInitialStateOverlapsGates, "GradInitialStateOverlapsGates", kInvalid},
    {Id::kGradInitialStateOverlapsStates, "GradInitialStateOverlapsStates", kInvalid},
    {Id::kGradInitialStateOverlapsGradOut, "GradInitialStateOverlapsGradOut", kInvalid},
    {Id::kGradInitialStateOverlapsGradGates, "GradInitialStateOverlapsGradGates", kInvalid},
    {Id::kGradInitialStateOverlapsGradTokens, "GradInitialStateOverlapsGradTokens", kInvalid},
    {Id::kGradInitialStatePartlyOverlapsInitialState, "GradInitialStatePartlyOverlapsInitialState",
     kInvalid},
    {Id::kGradInitialStatePartlyOverlapsGradFinalState,
     "GradInitialStatePartlyOverlapsGradFinalState", kInvalid},
    {Id::kGradInitialStatesOverlapEachOther, "GradInitialStatesOverlapEachOther", kInvalid},
    {Id::kNegativeStateStride, "NegativeStateStride", kInvalid},
    {Id::kStatePointerNotElementAligned, "StatePointerNotElementAligned", kInvalid},
    // An input state under an output: another sequence's block may overwrite it before this
    // sequence reads it (a race), as the forward's "initial_state overlaps out".
    {Id::kInitialStateOverlapsGradGates, "InitialStateOverlapsGradGates", kInvalid},
    {Id::kInitialStateOverlapsGradTokens, "InitialStateOverlapsGradTokens", kInvalid},
    {Id::kGradFinalStateOverlapsGradGates, "GradFinalStateOverlapsGradGates", kInvalid},
    {Id::kLengthInt64Max, "LengthInt64Max", kInvalid},
    {Id::kGradInitialStateExtentWraps, "GradInitialStateExtentWraps", kInvalid},
    {Id::kGradInitialStateEndsPastAddressSpace, "GradInitialStateEndsPastAddressSpace", kInvalid},
    {Id::kPackedCountInt64Max, "PackedCountInt64Max", kInvalid},
    {Id::kPackedOffsetsInsideGradTokens, "PackedOffsetsInsideGradTokens", kInvalid},
    {Id::kGradHalvesOneOff, "GradHalvesOneOff", kInvalid},
    {Id::kTimeStrideTwo, "TimeStrideTwo", kOk},
    {Id::kBaseline, "Baseline", kOk},
    {Id::kNoStates, "NoStates", kOk},
    {Id::kGradGatesEqualsGradOut, "GradGatesEqualsGradOut", kOk},
    {Id::kGradGatesEqualsStates, "GradGatesEqualsStates", kOk},
    {Id::kGradTokensEqualsGradOut, "GradTokensEqualsGradOut", kOk},
    {Id::kGradGatesEqualsStatesGradTokensEqualsGradOut,
     "GradGatesEqualsStatesGradTokensEqualsGradOut", kOk},
    {Id::kGradInitialStateEqualsInitialState, "GradInitialStateEqualsInitialState", kOk},
    {Id::kGradInitialStateEqualsGradFinalState, "GradInitialStateEqualsGradFinalState", kOk},
    {Id::kAllStatesEqual, "AllStatesEqual", kOk},
    {Id::kInputsOverlapEachOther, "InputsOverlapEachOther", kOk},
    {Id::kInputStatesBroadcast, "InputStatesBroadcast", kOk},
    {Id::kPaddedStrides, "PaddedStrides", kOk},
    {Id::kChannelsOutsideBatch, "ChannelsOutsideBatch", kOk},
    {Id::kSizeOneDimsAnyStride, "SizeOneDimsAnyStride", kOk},
    {Id::kStatesCustomLayout, "StatesCustomLayout", kOk},
    {Id::kEmptyBatchNullPointers, "EmptyBatchNullPointers", kOk},
    {Id::kEmptyChannelsNullPointers, "EmptyChannelsNullPointers", kOk},
    {Id::kEmptyLengthNullPointers, "EmptyLengthNullPointers", kOk},
    {Id::kEmptyNullPointersWithStates, "EmptyNullPointersWithStates", kOk},
    {Id::kGradHalvesOfOneBuffer, "GradHalvesOfOneBuffer", kOk},
    {Id::kGradInitialStateInterleavedWithInitialState,
     "GradInitialStateInterleavedWithInitialState", kOk},
};

/// Packed offsets for the packed cases (host memory: never read, every such case is refused).
const int64_t kOffsets64[3] = {0, 50, 100};

template <class T>
const T* misalign(const T* p) {
  return reinterpret_cast<const T*>(reinterpret_cast<const char*>(p) + 1);
}
template <class T>
T* misalign(T* p) {
  return reinterpret_cast<T*>(reinterpret_cast<char*>(p) + 1);
}

/// The arguments of case `id` inside `arena` (kArena elements). The base case is a packed
/// (2, 3, 100) backward pass with the five arrays in separate parts of the arena and no states;
/// each case changes one thing.
template <class T>
ScanBackwardArgs<T> make_args(Id id, T* arena) {
  ScanBackwardArgs<T> a;
  a.gates = arena + kGates;
  a.states = arena + kStates;
  a.grad_out = arena + kGradOut;
  a.grad_gates = arena + kGradGates;
  a.grad_tokens = arena + kGradTokens;
  a.shape = time_contiguous(2, 3, 100);
  Shape& s = a.shape;
  switch (id) {
    case Id::kNullGates:
      a.gates = nullptr;
      break;
    case Id::kNullStates:
      a.states = nullptr;
      break;
    case Id::kNullGradOut:
      a.grad_out = nullptr;
      break;
    case Id::kNullGradGates:
      a.grad_gates = nullptr;
      break;
    case Id::kNullGradTokens:
      a.grad_tokens = nullptr;
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
    case Id::kExtentOverflows:
      s.batch_stride = INT64_MAX / 2;
      s.batch = 3;
      break;
    case Id::kStatesNotElementAligned:
      a.states = misalign(a.states);
      break;
    case Id::kGradGatesNotElementAligned:
      a.grad_gates = misalign(a.grad_gates);
      break;
    case Id::kGradGatesEqualsGates:
      a.grad_gates = arena + kGates;
      break;
    case Id::kGradGatesPartlyOverlapsGates:
      a.grad_gates = arena + kGates + 50;
      break;
    case Id::kGradTokensEqualsGates:
      a.grad_tokens = arena + kGates;
      break;
    case Id::kGradGatesIsGradOutPlusOne:
      a.grad_gates = arena + kGradOut + 1;
      break;
    case Id::kGradGatesIsGradOutMinusOne:
      a.grad_gates = arena + kGradOut - 1;
      break;
    case Id::kGradGatesPartlyOverlapsStates:
      a.grad_gates = arena + kStates + 3;
      break;
    case Id::kGradTokensEqualsStates:
      a.grad_tokens = arena + kStates;
      break;
    case Id::kGradTokensPartlyOverlapsStates:
      a.grad_tokens = arena + kStates - 2;
      break;
    case Id::kGradTokensIsGradOutPlusOne:
      a.grad_tokens = arena + kGradOut + 1;
      break;
    case Id::kGradTokensEqualsGradGates:
      a.grad_tokens = a.grad_gates;
      break;
    case Id::kGradTokensPartlyOverlapsGradGates:
      a.grad_tokens = a.grad_gates + 7;
      break;
    case Id::kBothOntoGradOut:
      a.grad_gates = arena + kGradOut;
      a.grad_tokens = arena + kGradOut;
      break;
    case Id::kGradInitialStateOverlapsGates:
      a.grad_initial_state = arena + kGates + 10;
      break;
    case Id::kGradInitialStateOverlapsStates:
      a.initial_state = arena + kInit;
      a.grad_initial_state = arena + kStates + 599;
      break;
    case Id::kGradInitialStateOverlapsGradOut:
      a.grad_final_state = arena + kGradFinal;
      a.grad_initial_state = arena + kGradOut + 300;
      break;
    case Id::kGradInitialStateOverlapsGradGates:
      a.grad_initial_state = arena + kGradGates - 3;
      break;
    case Id::kGradInitialStateOverlapsGradTokens:
      a.grad_initial_state = arena + kGradTokens + 20;
      break;
    case Id::kGradInitialStatePartlyOverlapsInitialState:
      a.initial_state = arena + kInit;
      a.grad_initial_state = arena + kInit + 1;
      break;
    case Id::kGradInitialStatePartlyOverlapsGradFinalState:
      a.grad_final_state = arena + kGradFinal;
      a.grad_initial_state = arena + kGradFinal - 2;
      break;
    case Id::kGradInitialStatesOverlapEachOther:
      a.grad_initial_state = arena + kGradInit;
      a.state_layout = StateLayout{3, 0};  // every channel of a batch on one cell
      break;
    case Id::kNegativeStateStride:
      a.grad_initial_state = arena + kGradInit + 64;
      a.state_layout = StateLayout{-3, 1};
      break;
    case Id::kStatePointerNotElementAligned:
      a.initial_state = misalign(arena + kInit);
      break;
    case Id::kInitialStateOverlapsGradGates:
      a.initial_state = arena + kGradGates + 20;
      break;
    case Id::kInitialStateOverlapsGradTokens:
      a.initial_state = arena + kGradTokens + 595;
      a.grad_initial_state = arena + kGradInit;
      break;
    case Id::kGradFinalStateOverlapsGradGates:
      a.grad_final_state = arena + kGradGates;
      break;
    case Id::kLengthInt64Max:  // 2^63 - 1 elements: no array of them fits 64-bit indexing
      s = time_contiguous(1, 1, INT64_MAX);
      break;
    case Id::kGradInitialStateExtentWraps:  // batch b's states 2^62 elements apart
      a.grad_initial_state = arena + kGradInit;
      a.state_layout = StateLayout{int64_t{1} << 62, 1};
      break;
    case Id::kGradInitialStateEndsPastAddressSpace:  // six states from the top element on
      a.grad_initial_state = reinterpret_cast<T*>(UINTPTR_MAX - sizeof(T) + 1);
      break;
    case Id::kPackedCountInt64Max:  // count + 1 offsets: not a 64-bit count
      s = time_contiguous(1, 3, 100);
      a.packed = packed(kOffsets64, INT64_MAX);
      break;
    case Id::kPackedOffsetsInsideGradTokens:  // the kernel would read offsets that it writes
      s = time_contiguous(1, 3, 100);
      a.packed = packed(reinterpret_cast<const int64_t*>(arena + kGradTokens + 16), 2);
      break;
    case Id::kGradHalvesOneOff:  // as GradHalvesOfOneBuffer, grad_tokens one element late
      s.batch_stride = 2 * 300;
      a.grad_tokens = arena + kGradGates + 301;
      break;
    case Id::kGradHalvesOfOneBuffer:  // the channel halves of one (2, 6, 100) buffer
      s.batch_stride = 2 * 300;
      a.grad_tokens = arena + kGradGates + 300;
      break;
    case Id::kGradInitialStateInterleavedWithInitialState:  // (b, c) at 6b + 2c
      a.initial_state = arena + kInit;
      a.grad_initial_state = arena + kInit + 1;
      a.state_layout = StateLayout{6, 2};
      break;
    case Id::kTimeStrideTwo:
      s.time_stride = 2;
      s.channel_stride = 200;
      s.batch_stride = 600;
      break;
    case Id::kBaseline:
      a.initial_state = arena + kInit;
      a.grad_final_state = arena + kGradFinal;
      a.grad_initial_state = arena + kGradInit;
      break;
    case Id::kNoStates:
      break;
    case Id::kGradGatesEqualsGradOut:
      a.grad_gates = arena + kGradOut;
      break;
    case Id::kGradGatesEqualsStates:
      a.grad_gates = arena + kStates;
      break;
    case Id::kGradTokensEqualsGradOut:
      a.grad_tokens = arena + kGradOut;
      break;
    case Id::kGradGatesEqualsStatesGradTokensEqualsGradOut:
      a.grad_gates = arena + kStates;
      a.grad_tokens = arena + kGradOut;
      break;
    case Id::kGradInitialStateEqualsInitialState:
      a.initial_state = arena + kInit;
      a.grad_final_state = arena + kGradFinal;
      a.grad_initial_state = arena + kInit;
      break;
    case Id::kGradInitialStateEqualsGradFinalState:
      a.initial_state = arena + kInit;
      a.grad_final_state = arena + kGradFinal;
      a.grad_initial_state = arena + kGradFinal;
      break;
    case Id::kAllStatesEqual:
      a.initial_state = arena + kInit;
      a.grad_final_state = arena + kInit;
      a.grad_initial_state = arena + kInit;
      break;
    case Id::kInputsOverlapEachOther:  // inputs are only read: any overlap among them is fine
      a.states = arena + kGates;
      a.grad_out = arena + kGates + 1;
      a.initial_state = arena + kGates + 7;
      a.grad_final_state = arena + kGates + 7;
      break;
    case Id::kInputStatesBroadcast:  // read-only states may share cells (nothing is written)
      a.initial_state = arena + kInit;
      a.grad_final_state = arena + kGradFinal;
      a.state_layout = StateLayout{0, 0};
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
      a.grad_final_state = arena + kGradFinal;
      a.grad_initial_state = arena + kGradInit;
      a.state_layout = StateLayout{7, 2};
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
    case Id::kEmptyNullPointersWithStates:
      a = {};
      a.shape = time_contiguous(2, 3, 0);
      a.initial_state = arena + kInit;
      a.grad_final_state = arena + kGradFinal;
      a.grad_initial_state = arena + kGradInit;
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

class BackwardArgsTest : public ::testing::TestWithParam<ArgsCase> {};
class BackwardArgsGpuTest : public RequiresGpu<::testing::TestWithParam<ArgsCase>> {};

/// can_implement alone: host memory stands in for device memory, as it never reads either.
template <class T>
void check_can_implement(const ArgsCase& c) {
  SCOPED_TRACE(type_name<T>());
  std::vector<T> arena(kArena);
  const ScanBackwardArgs<T> a = make_args<T>(c.id, arena.data());
  EXPECT_TRUE(has_code(can_implement(a), c.expected));
}

TEST_P(BackwardArgsTest, CanImplement) {
  check_can_implement<float>(GetParam());
  check_can_implement<double>(GetParam());
  check_can_implement<__half>(GetParam());
  check_can_implement<__nv_bfloat16>(GetParam());
}

/// Poisons `n` cells of `before` from pointer `p` (clipped to the arena).
template <class T>
void poison_from(std::vector<T>& before, const T* arena, const T* p, int64_t n) {
  if (p == nullptr) return;
  const int64_t o = p - arena;
  for (int64_t i = std::max<int64_t>(o, 0); i < std::min<int64_t>(o + n, kArena); ++i)
    before[i] = poison_value<T>();
}

/// scan_backward() itself: the same verdict as can_implement, no CUDA error left behind, and
/// when refused (or empty) no cell of the arena changed. The arena holds finite random values (so
/// a kernel that ran would write new numbers) with the cells from each output on poisoned.
template <class T>
void check_scan_backward(const ArgsCase& c, bool own_stream) {
  SCOPED_TRACE(type_name<T>());
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(c.name, seed));
  Rng rng(seed);
  std::vector<T> before(kArena);
  for (T& v : before) v = from_double<T>(rng.uniform(-1.0, 1.0));
  DeviceBuffer<T> arena;
  ASSERT_TRUE(arena.allocate(kArena));
  const ScanBackwardArgs<T> a = make_args<T>(c.id, arena.get());
  // Pointers made misaligned on purpose are rounded down to a cell for this.
  const auto cell = [&](const T* p) -> const T* {
    if (p == nullptr) return nullptr;
    const auto base = reinterpret_cast<uintptr_t>(arena.get());
    const auto q = reinterpret_cast<uintptr_t>(p);
    return arena.get() + static_cast<int64_t>(q - base) / static_cast<int64_t>(sizeof(T));
  };
  poison_from(before, arena.get(), cell(a.grad_gates), 1024);
  poison_from(before, arena.get(), cell(a.grad_tokens), 1024);
  poison_from(before, arena.get(), cell(a.grad_initial_state), 64);
  ASSERT_TRUE(arena.upload(before));
  Stream stream;
  if (own_stream) ASSERT_TRUE(stream.create());

  const Status v = can_implement(a);
  EXPECT_TRUE(has_code(v, c.expected));
  const Status s = scan_backward(a, stream.get());
  EXPECT_EQ(s.code, v.code) << "scan_backward and can_implement disagree: scan_backward says \""
                            << s.message << "\", can_implement \"" << v.message << "\"";
  EXPECT_TRUE(has_code(s, c.expected));
  // The other entry points judge alike; a refused size query leaves workspace_bytes alone.
  size_t bytes = 12345;
  const Status q = scan_backward(a, nullptr, bytes, stream.get());
  EXPECT_EQ(q.code, v.code) << "the size query says \"" << q.message << "\"";
  if (!v.ok()) EXPECT_EQ(bytes, 12345u) << "a refused size query wrote workspace_bytes";
  const Status m = scan_backward(a, malloc_async, stream.get());
  EXPECT_EQ(m.code, v.code) << "the malloc_async entry point says \"" << m.message << "\"";
  ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after scan_backward)"));
  EXPECT_TRUE(no_pending_cuda_error());
  // A refused call, and an empty one, does nothing.
  if (c.expected == StatusCode::kSuccess && !a.shape.empty()) return;

  std::vector<T> after;
  ASSERT_TRUE(arena.download(after));
  int64_t changed = 0, first = -1;
  for (int64_t i = 0; i < kArena; ++i)
    if (!bitwise_equal(after[i], before[i]) && changed++ == 0) first = i;
  EXPECT_EQ(changed, 0) << "scan_backward wrote " << changed << " cells; first at arena[" << first
                        << "]";
}

TEST_P(BackwardArgsGpuTest, ScanBackward) {
  check_scan_backward<float>(GetParam(), false);
  check_scan_backward<double>(GetParam(), true);
  check_scan_backward<__half>(GetParam(), false);
  check_scan_backward<__nv_bfloat16>(GetParam(), true);
}

INSTANTIATE_TEST_SUITE_P(Validate, BackwardArgsTest, ::testing::ValuesIn(kCases), case_name);
INSTANTIATE_TEST_SUITE_P(Validate, BackwardArgsGpuTest, ::testing::ValuesIn(kCases), case_name);

/// A refused call followed by a good one: the refusal left nothing that spoils the next call.
class BackwardAfterRefusalTest : public RequiresGpu<> {};

TEST_F(BackwardAfterRefusalTest, NextCallSucceeds) {
  constexpr int kN = 64;
  DeviceBuffer<float> a, x, g, da, db, dh0;
  for (DeviceBuffer<float>* b : {&a, &x, &g, &da, &db, &dh0}) ASSERT_TRUE(b->allocate(kN));
  std::vector<float> ones(kN, 1.0f), twos(kN, 2.0f);
  ASSERT_TRUE(a.upload(ones));
  ASSERT_TRUE(x.upload(twos));
  ASSERT_TRUE(g.upload(ones));
  ScanBackwardArgs<float> args;
  args.gates = a.get();
  args.states = x.get();
  args.grad_out = g.get();
  args.grad_gates = a.get();  // over gates: refused
  args.grad_tokens = db.get();
  args.grad_initial_state = dh0.get();
  args.shape = time_contiguous(1, 1, kN);
  EXPECT_EQ(scan_backward(args).code, StatusCode::kInvalidArgument);
  args.grad_gates = da.get();
  const Status s = scan_backward(args);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
  ASSERT_TRUE(no_pending_cuda_error());
  // Gates 1, g 1: d[t] = kN - t; grad_gates[t] = d[t] * x[t-1] = 2 d[t] (0 at t = 0, h0 = 0).
  std::vector<float> got_da, got_db, got_dh0;
  ASSERT_TRUE(da.download(got_da));
  ASSERT_TRUE(db.download(got_db));
  ASSERT_TRUE(dh0.download(got_dh0));
  for (int t = 0; t < kN; ++t) {
    EXPECT_EQ(got_db[t], static_cast<float>(kN - t)) << "grad_tokens at " << t;
    EXPECT_EQ(got_da[t], t == 0 ? 0.0f : 2.0f * static_cast<float>(kN - t))
        << "grad_gates at " << t;
  }
  EXPECT_EQ(got_dh0[0], static_cast<float>(kN)) << "grad_initial_state";
}

}  // namespace
}  // namespace ascan::test
