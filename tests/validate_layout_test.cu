// tests/validate_layout_test.cu: the argument rules of the layouts beyond time-contiguous
// (channel-last and general strides, per-array strides, broadcast inputs, packed sequences),
// checked by can_implement alone.
//
// As validate_test.cu: each case builds the arguments inside one arena of HOST memory
// (can_implement reads no memory and makes no CUDA call, so no GPU is needed and none is touched;
// the packed offsets are host arrays too) and says what can_implement must return, for all four
// types. A refusal must be kInvalidArgument with a readable message.
//   LayoutArgsTest.CanImplement/<case>          forward (ScanArgs)
//   LayoutBackwardArgsTest.CanImplement/<case>  backward (ScanBackwardArgs)
//   LayoutHelpers.*                             channel_last, packed and the defaults
#include <ascan/ascan.cuh>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "test_util.cuh"

namespace ascan::test {
namespace {

/// The arena: the sequence arrays of the base case sit kSpan elements apart, the states after.
/// The base case is channel-last (B, T, C) = (2, 100, 8): 1600 elements per array.
constexpr int64_t kB = 2, kT = 100, kC = 8;
constexpr int64_t kSpan = 4096;
constexpr int64_t kInit = 5 * kSpan, kFinal = 5 * kSpan + 512, kGradInit = 5 * kSpan + 1024;
constexpr int64_t kArena = 6 * kSpan;

/// The strides of the two halves of a fused (B, T, 2C) tensor.
constexpr Strides kFused{kT * 2 * kC, 1, 2 * kC};

/// Packed offsets (never read: can_implement does not touch them).
const int32_t kOffsets32[] = {0, 40, 40, 100};
const int64_t kOffsets64[] = {0, 40, 40, 100};

constexpr StatusCode kInvalid = StatusCode::kInvalidArgument;
constexpr StatusCode kOk = StatusCode::kSuccess;

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

// ---------------------------------------------------------------------------------------------
// Forward

enum class Id {
  // refused: kInvalidArgument
  kNegativeShapeTimeStride,
  kNegativeGatesStride,
  kNegativeTokensStride,
  kNegativeOutStride,
  kOutZeroTimeStride,
  kOutZeroChannelStride,
  kOutZeroBatchStride,
  kShapeZeroTimeStride,
  kOutTimeStrideBelowChannels,
  kOutBatchStrideOverlapsTime,
  kOutEqualsTokensDifferentStrides,
  kOutEqualsTokensTokensOwnStrides,
  kOutIsTokensPlusOne,
  kOutOverlapsGatesSameStrides,
  kOutDenseOverFusedGates,
  kFinalStateOverlapsChannelLastOut,
  kPackedBatchNotOne,
  kPackedNullOffsets,
  kPackedNegativeCount,
  kPackedZeroCountNonEmpty,
  kPackedFinalStateOverlapsOut,
  // accepted
  kChannelLast,
  kChannelLastStates,
  kPaddedRows,
  kGeneralStrides,
  kTimeBatchChannelOrder,
  kGatesZeroTimeStride,
  kGatesZeroBatchStride,
  kGatesAllStridesZero,
  kTokensZeroTimeStride,
  kInPlaceChannelLast,
  kInPlaceSameOwnStrides,
  kInPlaceOutOwnStridesEqualShape,
  kFusedHalves,
  kInPlaceOverFusedTokensHalf,
  kOutOtherHalfOfFusedGates,
  kOutOwnStridesPadded,
  kOutZeroStrideOverSizeOneBatch,
  kZeroTimeStrideLengthOne,
  kPackedChannelLastStates32,
  kPackedTimeContiguousStates64,
  kPackedOneSequence,
  kPackedNoStates,
  kPackedZeroCountEmptyShape,
};

struct ArgsCase {
  Id id;
  const char* name;
  StatusCode expected;
};

const ArgsCase kCases[] = {
    {Id::kNegativeShapeTimeStride, "NegativeShapeTimeStride", kInvalid},
    {Id::kNegativeGatesStride, "NegativeGatesStride", kInvalid},
    {Id::kNegativeTokensStride, "NegativeTokensStride", kInvalid},
    {Id::kNegativeOutStride, "NegativeOutStride", kInvalid},
    {Id::kOutZeroTimeStride, "OutZeroTimeStride", kInvalid},
    {Id::kOutZeroChannelStride, "OutZeroChannelStride", kInvalid},
    {Id::kOutZeroBatchStride, "OutZeroBatchStride", kInvalid},
    {Id::kShapeZeroTimeStride, "ShapeZeroTimeStride", kInvalid},
    {Id::kOutTimeStrideBelowChannels, "OutTimeStrideBelowChannels", kInvalid},
    {Id::kOutBatchStrideOverlapsTime, "OutBatchStrideOverlapsTime", kInvalid},
    {Id::kOutEqualsTokensDifferentStrides, "OutEqualsTokensDifferentStrides", kInvalid},
    {Id::kOutEqualsTokensTokensOwnStrides, "OutEqualsTokensTokensOwnStrides", kInvalid},
    {Id::kOutIsTokensPlusOne, "OutIsTokensPlusOne", kInvalid},
    {Id::kOutOverlapsGatesSameStrides, "OutOverlapsGatesSameStrides", kInvalid},
    {Id::kOutDenseOverFusedGates, "OutDenseOverFusedGates", kInvalid},
    {Id::kFinalStateOverlapsChannelLastOut, "FinalStateOverlapsChannelLastOut", kInvalid},
    {Id::kPackedBatchNotOne, "PackedBatchNotOne", kInvalid},
    {Id::kPackedNullOffsets, "PackedNullOffsets", kInvalid},
    {Id::kPackedNegativeCount, "PackedNegativeCount", kInvalid},
    {Id::kPackedZeroCountNonEmpty, "PackedZeroCountNonEmpty", kInvalid},
    {Id::kPackedFinalStateOverlapsOut, "PackedFinalStateOverlapsOut", kInvalid},
    {Id::kChannelLast, "ChannelLast", kOk},
    {Id::kChannelLastStates, "ChannelLastStates", kOk},
    {Id::kPaddedRows, "PaddedRows", kOk},
    {Id::kGeneralStrides, "GeneralStrides", kOk},
    {Id::kTimeBatchChannelOrder, "TimeBatchChannelOrder", kOk},
    {Id::kGatesZeroTimeStride, "GatesZeroTimeStride", kOk},
    {Id::kGatesZeroBatchStride, "GatesZeroBatchStride", kOk},
    {Id::kGatesAllStridesZero, "GatesAllStridesZero", kOk},
    {Id::kTokensZeroTimeStride, "TokensZeroTimeStride", kOk},
    {Id::kInPlaceChannelLast, "InPlaceChannelLast", kOk},
    {Id::kInPlaceSameOwnStrides, "InPlaceSameOwnStrides", kOk},
    {Id::kInPlaceOutOwnStridesEqualShape, "InPlaceOutOwnStridesEqualShape", kOk},
    {Id::kFusedHalves, "FusedHalves", kOk},
    // Interleaved with gates, but no element shared: an in-place scan of a fused projection.
    {Id::kInPlaceOverFusedTokensHalf, "InPlaceOverFusedTokensHalf", kOk},
    {Id::kOutOtherHalfOfFusedGates, "OutOtherHalfOfFusedGates", kOk},
    {Id::kOutOwnStridesPadded, "OutOwnStridesPadded", kOk},
    {Id::kOutZeroStrideOverSizeOneBatch, "OutZeroStrideOverSizeOneBatch", kOk},
    {Id::kZeroTimeStrideLengthOne, "ZeroTimeStrideLengthOne", kOk},
    {Id::kPackedChannelLastStates32, "PackedChannelLastStates32", kOk},
    {Id::kPackedTimeContiguousStates64, "PackedTimeContiguousStates64", kOk},
    {Id::kPackedOneSequence, "PackedOneSequence", kOk},
    {Id::kPackedNoStates, "PackedNoStates", kOk},
    {Id::kPackedZeroCountEmptyShape, "PackedZeroCountEmptyShape", kOk},
};

/// The arguments of case `id` inside `arena` (kArena elements). The base case is a channel-last
/// (2, 100, 8) scan with gates, tokens and out kSpan elements apart and no states; each case
/// changes one thing (or builds the layout it names).
template <class T>
ScanArgs<T> make_args(Id id, T* arena) {
  ScanArgs<T> a;
  a.gates = arena;
  a.tokens = arena + kSpan;
  a.out = arena + 2 * kSpan;
  a.shape = channel_last(kB, kT, kC);
  Shape& s = a.shape;
  switch (id) {
    case Id::kNegativeShapeTimeStride:
      s.time_stride = -kC;
      break;
    case Id::kNegativeGatesStride:
      a.gates_strides = Strides{kT * kC, 1, -kC};
      break;
    case Id::kNegativeTokensStride:
      a.tokens_strides = Strides{kT * kC, -1, kC};
      break;
    case Id::kNegativeOutStride:
      a.out_strides = Strides{-kT * kC, 1, kC};
      break;
    case Id::kOutZeroTimeStride:
      a.out_strides = Strides{kT * kC, 1, 0};
      break;
    case Id::kOutZeroChannelStride:
      a.out_strides = Strides{kT * kC, 0, kC};
      break;
    case Id::kOutZeroBatchStride:
      a.out_strides = Strides{0, 1, kC};
      break;
    case Id::kShapeZeroTimeStride:  // out takes the shape's strides
      s.time_stride = 0;
      break;
    case Id::kOutTimeStrideBelowChannels:  // rows of 4 elements for 8 channels
      s.time_stride = 4;
      s.batch_stride = kT * 4 + kC;
      break;
    case Id::kOutBatchStrideOverlapsTime:
      s.batch_stride = kT * kC / 2;
      break;
    case Id::kOutEqualsTokensDifferentStrides:
      a.out = arena + kSpan;
      a.out_strides = Strides{kC * kT, kT, 1};
      break;
    case Id::kOutEqualsTokensTokensOwnStrides:  // tokens in rows of 16, out dense: not an alias
      a.out = arena + kSpan;
      a.tokens_strides = kFused;
      break;
    case Id::kOutIsTokensPlusOne:
      a.out = arena + kSpan + 1;
      break;
    case Id::kOutOverlapsGatesSameStrides:  // gates and out rows of 16, one element apart
      a.gates_strides = kFused;
      a.out = arena + 1;
      a.out_strides = kFused;
      break;
    case Id::kOutDenseOverFusedGates:  // gates a half of (B, T, 2C), out dense over the same
      a.gates_strides = kFused;
      a.out = arena + kC;
      break;
    case Id::kFinalStateOverlapsChannelLastOut:
      a.final_state = arena + 2 * kSpan + kT * kC;  // inside the second batch of out
      break;
    case Id::kPackedBatchNotOne:
      a.packed = packed(kOffsets32, 3);
      break;
    case Id::kPackedNullOffsets:
      s = channel_last(1, kT, kC);
      a.packed = packed(static_cast<const int32_t*>(nullptr), 3);
      break;
    case Id::kPackedNegativeCount:
      s = channel_last(1, kT, kC);
      a.packed = packed(kOffsets32, -1);
      break;
    case Id::kPackedZeroCountNonEmpty:
      s = channel_last(1, kT, kC);
      a.packed = packed(kOffsets32, 0);
      break;
    case Id::kPackedFinalStateOverlapsOut:  // (N, C) = (3, 8) states ending inside out
      s = channel_last(1, kT, kC);
      a.packed = packed(kOffsets32, 3);
      a.final_state = arena + 2 * kSpan - 10;
      break;
    case Id::kChannelLast:
      break;
    case Id::kChannelLastStates:
      a.initial_state = arena + kInit;
      a.final_state = arena + kFinal;
      break;
    case Id::kPaddedRows:
      s.time_stride = 12;
      s.batch_stride = kT * 12 + 3;
      break;
    case Id::kGeneralStrides:  // (C, T, B): batch fastest
      s.batch_stride = 1;
      s.time_stride = kB;
      s.channel_stride = kT * kB;
      break;
    case Id::kTimeBatchChannelOrder:  // (T, B, C)
      s.channel_stride = 1;
      s.batch_stride = kC;
      s.time_stride = kB * kC;
      break;
    case Id::kGatesZeroTimeStride:
      a.gates_strides = Strides{kC, 1, 0};
      break;
    case Id::kGatesZeroBatchStride:
      a.gates_strides = Strides{0, 1, kC};
      break;
    case Id::kGatesAllStridesZero:
      a.gates_strides = Strides{0, 0, 0};
      break;
    case Id::kTokensZeroTimeStride:
      a.tokens_strides = Strides{kC, 1, 0};
      break;
    case Id::kInPlaceChannelLast:
      a.out = arena + kSpan;
      break;
    case Id::kInPlaceSameOwnStrides:
      a.out = arena + kSpan;
      a.tokens_strides = kFused;
      a.out_strides = kFused;
      break;
    case Id::kInPlaceOutOwnStridesEqualShape:
      a.out = arena + kSpan;
      a.out_strides = Strides{kT * kC, 1, kC};
      break;
    case Id::kFusedHalves:
      a.gates_strides = kFused;
      a.tokens = arena + kC;
      a.tokens_strides = kFused;
      break;
    case Id::kInPlaceOverFusedTokensHalf:
      a.gates_strides = kFused;
      a.tokens = arena + kC;
      a.tokens_strides = kFused;
      a.out = arena + kC;
      a.out_strides = kFused;
      break;
    case Id::kOutOtherHalfOfFusedGates:
      a.gates_strides = kFused;
      a.out = arena + kC;
      a.out_strides = kFused;
      break;
    case Id::kOutOwnStridesPadded:
      a.out_strides = Strides{kT * 16 + 5, 1, 16};
      break;
    case Id::kOutZeroStrideOverSizeOneBatch:
      s = channel_last(1, kT, kC);
      a.out_strides = Strides{0, 1, kC};
      break;
    case Id::kZeroTimeStrideLengthOne:
      s = channel_last(kB, 1, kC);
      s.time_stride = 0;
      break;
    case Id::kPackedChannelLastStates32:
      s = channel_last(1, kT, kC);
      a.packed = packed(kOffsets32, 3);
      a.initial_state = arena + kInit;
      a.final_state = arena + kFinal;
      break;
    case Id::kPackedTimeContiguousStates64:
      s = time_contiguous(1, kC, kT);
      a.packed = packed(kOffsets64, 3);
      a.initial_state = arena + kInit;
      a.final_state = arena + kFinal;
      break;
    case Id::kPackedOneSequence:
      s = channel_last(1, kT, kC);
      a.packed = packed(kOffsets64, 1);
      a.initial_state = arena + kInit;
      a.final_state = arena + kFinal;
      break;
    case Id::kPackedNoStates:
      s = time_contiguous(1, kC, kT);
      a.packed = packed(kOffsets32, 3);
      break;
    case Id::kPackedZeroCountEmptyShape:
      s = channel_last(1, 0, kC);
      a.packed = packed(kOffsets32, 0);
      break;
  }
  return a;
}

std::string case_name(const ::testing::TestParamInfo<ArgsCase>& info) { return info.param.name; }

class LayoutArgsTest : public ::testing::TestWithParam<ArgsCase> {};

/// can_implement alone, on host memory: it reads neither.
template <class T>
void check_can_implement(const ArgsCase& c) {
  SCOPED_TRACE(type_name<T>());
  std::vector<T> arena(kArena);
  const ScanArgs<T> a = make_args<T>(c.id, arena.data());
  EXPECT_TRUE(has_code(can_implement(a), c.expected));
}

TEST_P(LayoutArgsTest, CanImplement) {
  check_can_implement<float>(GetParam());
  check_can_implement<double>(GetParam());
  check_can_implement<__half>(GetParam());
  check_can_implement<__nv_bfloat16>(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Validate, LayoutArgsTest, ::testing::ValuesIn(kCases), case_name);

// ---------------------------------------------------------------------------------------------
// Backward

enum class BwId {
  // refused: kInvalidArgument
  kNegativeStatesStride,
  kNegativeGradOutStride,
  kGradGatesZeroTimeStride,
  kGradTokensZeroBatchStride,
  kShapeZeroTimeStride,
  kTimeStrideBelowChannels,
  kGradGatesOverlapsGatesSameStrides,
  kGradGatesOverFusedGates,
  kGradGatesOverlapsGradTokensSameStrides,
  kGradTokensEqualsGradOutDifferentStrides,
  kGradGatesEqualsStatesDifferentStrides,
  kGradInitialStateOverlapsChannelLastGradGates,
  kPackedBatchNotOne,
  kPackedNullOffsets,
  kPackedNegativeCount,
  kPackedZeroCountNonEmpty,
  // accepted
  kChannelLastStates,
  kPaddedRows,
  kGeneralStrides,
  kGatesZeroTimeStride,
  kGatesZeroBatchStride,
  kGradOutZeroTimeStride,
  kInPlaceChannelLast,
  kInPlaceSameOwnStrides,
  kFusedGatesHalf,
  kFusedGradientHalves,
  kPackedChannelLastStates32,
  kPackedTimeContiguousStates64,
};

struct BwArgsCase {
  BwId id;
  const char* name;
  StatusCode expected;
};

const BwArgsCase kBwCases[] = {
    {BwId::kNegativeStatesStride, "NegativeStatesStride", kInvalid},
    {BwId::kNegativeGradOutStride, "NegativeGradOutStride", kInvalid},
    {BwId::kGradGatesZeroTimeStride, "GradGatesZeroTimeStride", kInvalid},
    {BwId::kGradTokensZeroBatchStride, "GradTokensZeroBatchStride", kInvalid},
    {BwId::kShapeZeroTimeStride, "ShapeZeroTimeStride", kInvalid},
    {BwId::kTimeStrideBelowChannels, "TimeStrideBelowChannels", kInvalid},
    {BwId::kGradGatesOverlapsGatesSameStrides, "GradGatesOverlapsGatesSameStrides", kInvalid},
    {BwId::kGradGatesOverFusedGates, "GradGatesOverFusedGates", kInvalid},
    {BwId::kGradGatesOverlapsGradTokensSameStrides, "GradGatesOverlapsGradTokensSameStrides",
     kInvalid},
    {BwId::kGradTokensEqualsGradOutDifferentStrides, "GradTokensEqualsGradOutDifferentStrides",
     kInvalid},
    {BwId::kGradGatesEqualsStatesDifferentStrides, "GradGatesEqualsStatesDifferentStrides",
     kInvalid},
    {BwId::kGradInitialStateOverlapsChannelLastGradGates,
     "GradInitialStateOverlapsChannelLastGradGates", kInvalid},
    {BwId::kPackedBatchNotOne, "PackedBatchNotOne", kInvalid},
    {BwId::kPackedNullOffsets, "PackedNullOffsets", kInvalid},
    {BwId::kPackedNegativeCount, "PackedNegativeCount", kInvalid},
    {BwId::kPackedZeroCountNonEmpty, "PackedZeroCountNonEmpty", kInvalid},
    {BwId::kChannelLastStates, "ChannelLastStates", kOk},
    {BwId::kPaddedRows, "PaddedRows", kOk},
    {BwId::kGeneralStrides, "GeneralStrides", kOk},
    {BwId::kGatesZeroTimeStride, "GatesZeroTimeStride", kOk},
    {BwId::kGatesZeroBatchStride, "GatesZeroBatchStride", kOk},
    {BwId::kGradOutZeroTimeStride, "GradOutZeroTimeStride", kOk},
    {BwId::kInPlaceChannelLast, "InPlaceChannelLast", kOk},
    {BwId::kInPlaceSameOwnStrides, "InPlaceSameOwnStrides", kOk},
    {BwId::kFusedGatesHalf, "FusedGatesHalf", kOk},
    // The gradient of a fused projection: two interleaved outputs that share no element.
    {BwId::kFusedGradientHalves, "FusedGradientHalves", kOk},
    {BwId::kPackedChannelLastStates32, "PackedChannelLastStates32", kOk},
    {BwId::kPackedTimeContiguousStates64, "PackedTimeContiguousStates64", kOk},
};

/// The arguments of backward case `id` inside `arena`. The base case is a channel-last
/// (2, 100, 8) backward pass with gates, states, grad_out, grad_gates and grad_tokens kSpan
/// elements apart and no states; each case changes one thing.
template <class T>
ScanBackwardArgs<T> make_backward_args(BwId id, T* arena) {
  ScanBackwardArgs<T> a;
  a.gates = arena;
  a.states = arena + kSpan;
  a.grad_out = arena + 2 * kSpan;
  a.grad_gates = arena + 3 * kSpan;
  a.grad_tokens = arena + 4 * kSpan;
  a.shape = channel_last(kB, kT, kC);
  Shape& s = a.shape;
  const auto all_states = [&] {
    a.initial_state = arena + kInit;
    a.grad_final_state = arena + kFinal;
    a.grad_initial_state = arena + kGradInit;
  };
  switch (id) {
    case BwId::kNegativeStatesStride:
      a.states_strides = Strides{kT * kC, 1, -kC};
      break;
    case BwId::kNegativeGradOutStride:
      a.grad_out_strides = Strides{-1, 1, kC};
      break;
    case BwId::kGradGatesZeroTimeStride:
      a.grad_gates_strides = Strides{kT * kC, 1, 0};
      break;
    case BwId::kGradTokensZeroBatchStride:
      a.grad_tokens_strides = Strides{0, 1, kC};
      break;
    case BwId::kShapeZeroTimeStride:  // the gradients take the shape's strides
      s.time_stride = 0;
      break;
    case BwId::kTimeStrideBelowChannels:
      s.time_stride = 4;
      s.batch_stride = kT * 4 + kC;
      break;
    case BwId::kGradGatesOverlapsGatesSameStrides:
      a.gates_strides = kFused;
      a.grad_gates = arena + 1;
      a.grad_gates_strides = kFused;
      break;
    case BwId::kGradGatesOverFusedGates:
      a.gates_strides = kFused;
      a.grad_gates = arena + kC;
      break;
    case BwId::kGradGatesOverlapsGradTokensSameStrides:
      a.grad_gates_strides = kFused;
      a.grad_tokens = arena + 3 * kSpan + 1;
      a.grad_tokens_strides = kFused;
      break;
    case BwId::kGradTokensEqualsGradOutDifferentStrides:
      a.grad_tokens = arena + 2 * kSpan;
      a.grad_tokens_strides = Strides{kC * kT, kT, 1};
      break;
    case BwId::kGradGatesEqualsStatesDifferentStrides:
      a.grad_gates = arena + kSpan;
      a.grad_gates_strides = kFused;
      break;
    case BwId::kGradInitialStateOverlapsChannelLastGradGates:
      a.grad_initial_state = arena + 3 * kSpan + kT * kC + 3;
      break;
    case BwId::kPackedBatchNotOne:
      a.packed = packed(kOffsets64, 3);
      break;
    case BwId::kPackedNullOffsets:
      s = channel_last(1, kT, kC);
      a.packed = packed(static_cast<const int64_t*>(nullptr), 3);
      break;
    case BwId::kPackedNegativeCount:
      s = channel_last(1, kT, kC);
      a.packed = packed(kOffsets64, -2);
      break;
    case BwId::kPackedZeroCountNonEmpty:
      s = time_contiguous(1, kC, kT);
      a.packed = packed(kOffsets32, 0);
      break;
    case BwId::kChannelLastStates:
      all_states();
      break;
    case BwId::kPaddedRows:
      s.time_stride = 12;
      s.batch_stride = kT * 12;
      all_states();
      break;
    case BwId::kGeneralStrides:
      s.batch_stride = 1;
      s.time_stride = kB;
      s.channel_stride = kT * kB;
      break;
    case BwId::kGatesZeroTimeStride:
      a.gates_strides = Strides{kC, 1, 0};
      break;
    case BwId::kGatesZeroBatchStride:
      a.gates_strides = Strides{0, 1, kC};
      break;
    case BwId::kGradOutZeroTimeStride:
      a.grad_out_strides = Strides{kC, 1, 0};
      break;
    case BwId::kInPlaceChannelLast:
      a.grad_gates = arena + kSpan;
      a.grad_tokens = arena + 2 * kSpan;
      all_states();
      break;
    case BwId::kInPlaceSameOwnStrides:
      a.states_strides = kFused;
      a.grad_gates = arena + kSpan;
      a.grad_gates_strides = kFused;
      a.grad_out_strides = Strides{kT * kC + 7, 1, kC};
      a.grad_tokens = arena + 2 * kSpan;
      a.grad_tokens_strides = Strides{kT * kC + 7, 1, kC};
      break;
    case BwId::kFusedGatesHalf:
      a.gates = arena + kC;
      a.gates_strides = kFused;
      break;
    case BwId::kFusedGradientHalves:
      a.grad_gates_strides = kFused;
      a.grad_tokens = arena + 3 * kSpan + kC;
      a.grad_tokens_strides = kFused;
      break;
    case BwId::kPackedChannelLastStates32:
      s = channel_last(1, kT, kC);
      a.packed = packed(kOffsets32, 3);
      all_states();
      break;
    case BwId::kPackedTimeContiguousStates64:
      s = time_contiguous(1, kC, kT);
      a.packed = packed(kOffsets64, 3);
      all_states();
      break;
  }
  return a;
}

std::string bw_case_name(const ::testing::TestParamInfo<BwArgsCase>& info) {
  return info.param.name;
}

class LayoutBackwardArgsTest : public ::testing::TestWithParam<BwArgsCase> {};

template <class T>
void check_backward_can_implement(const BwArgsCase& c) {
  SCOPED_TRACE(type_name<T>());
  std::vector<T> arena(kArena);
  const ScanBackwardArgs<T> a = make_backward_args<T>(c.id, arena.data());
  EXPECT_TRUE(has_code(can_implement(a), c.expected));
}

TEST_P(LayoutBackwardArgsTest, CanImplement) {
  check_backward_can_implement<float>(GetParam());
  check_backward_can_implement<double>(GetParam());
  check_backward_can_implement<__half>(GetParam());
  check_backward_can_implement<__nv_bfloat16>(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Validate, LayoutBackwardArgsTest, ::testing::ValuesIn(kBwCases),
                         bw_case_name);

// ---------------------------------------------------------------------------------------------
// Helpers and defaults

TEST(LayoutHelpers, ChannelLast) {
  constexpr Shape s = channel_last(2, 5, 3);  // (B, T, C) = (2, 5, 3)
  static_assert(s.batch == 2 && s.channels == 3 && s.length == 5, "sizes (B, C, T)");
  static_assert(s.batch_stride == 15 && s.channel_stride == 1 && s.time_stride == 3,
                "strides (T*C, 1, C)");
  EXPECT_EQ(s.sequences(), 6);
  EXPECT_EQ(s.elements(), 30);
  const Shape one = channel_last(1, 70000, 1536);
  EXPECT_EQ(one.batch, 1);
  EXPECT_EQ(one.channels, 1536);
  EXPECT_EQ(one.length, 70000);
  EXPECT_EQ(one.batch_stride, int64_t(70000) * 1536);
  EXPECT_EQ(one.channel_stride, 1);
  EXPECT_EQ(one.time_stride, 1536);
  // Element (b, c, t) of channel_last(B, T, C) is at b*T*C + t*C + c.
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 5; ++t)
      for (int64_t c = 0; c < 3; ++c)
        EXPECT_EQ(b * s.batch_stride + c * s.channel_stride + t * s.time_stride,
                  b * 5 * 3 + t * 3 + c);
  EXPECT_TRUE(channel_last(0, 5, 3).empty());
  EXPECT_TRUE(channel_last(2, 0, 3).empty());
  EXPECT_TRUE(channel_last(2, 5, 0).empty());
}

TEST(LayoutHelpers, TimeContiguousUnchanged) {
  constexpr Shape s = time_contiguous(2, 3, 5);
  static_assert(s.batch_stride == 15 && s.channel_stride == 5 && s.time_stride == 1, "");
  EXPECT_EQ(Shape{}.time_stride, 1);
}

TEST(LayoutHelpers, Packed) {
  const int32_t o32[] = {0, 3, 3, 10};
  const int64_t o64[] = {0, 3, 3, 10};
  const Packed p32 = packed(o32, 3);
  EXPECT_EQ(p32.offsets32, o32);
  EXPECT_EQ(p32.offsets64, nullptr);
  EXPECT_EQ(p32.count, 3);
  EXPECT_TRUE(p32.active());
  const Packed p64 = packed(o64, 3);
  EXPECT_EQ(p64.offsets32, nullptr);
  EXPECT_EQ(p64.offsets64, o64);
  EXPECT_EQ(p64.count, 3);
  EXPECT_TRUE(p64.active());
  EXPECT_FALSE(Packed{}.active());
  EXPECT_TRUE(packed(static_cast<const int32_t*>(nullptr), 2).active())
      << "a count without offsets is still a packed call (and refused)";
  EXPECT_TRUE(packed(o32, 0).active());
}

TEST(LayoutHelpers, Defaults) {
  const Strides st{};
  EXPECT_EQ(st.batch_stride, 0);
  EXPECT_EQ(st.channel_stride, 0);
  EXPECT_EQ(st.time_stride, 0);
  const ScanArgs<float> a;
  EXPECT_FALSE(a.gates_strides.has_value());
  EXPECT_FALSE(a.tokens_strides.has_value());
  EXPECT_FALSE(a.out_strides.has_value());
  EXPECT_FALSE(a.packed.active());
  const ScanBackwardArgs<float> b;
  EXPECT_FALSE(b.gates_strides.has_value());
  EXPECT_FALSE(b.states_strides.has_value());
  EXPECT_FALSE(b.grad_out_strides.has_value());
  EXPECT_FALSE(b.grad_gates_strides.has_value());
  EXPECT_FALSE(b.grad_tokens_strides.has_value());
  EXPECT_FALSE(b.packed.active());
}

}  // namespace
}  // namespace ascan::test
