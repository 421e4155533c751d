"""The torch.library ops behind ascan.scan: their real (CUDA) and fake implementations, the
autograd formula through ascan's fused backward, and the argument checks of the public API.

Two ops, both functional (they allocate their outputs):

    ascan::scan_fwd(gates, tokens, initial_state?, cu_seqlens?, reverse, channel_last,
                    need_final_state=True)
        -> (out, final_state)   (final_state (0, 0) where not needed)
    ascan::scan_bwd(gates, states, grad_out, initial_state?, grad_final_state?, cu_seqlens?,
                    reverse, channel_last, need_grad_initial_state)
        -> (grad_gates, grad_tokens, grad_initial_state)

Their schemas, fake implementations and autograd are registered when this module is imported,
with or without the compiled extension ascan._C, so shapes propagate under FakeTensorMode and
torch.compile traces them on any machine; only running them needs ascan._C and a GPU.
"""

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _ext

SUPPORTED_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
LAYOUTS = ("bct", "btc")
# Device types ascan.scan accepts. The tests widen it to "cpu" when they stand a CPU emulation
# in for the CUDA kernels (tests/cpu_kernels.py); users have no reason to touch it.
_DEVICE_TYPES = ("cuda",)


# --------------------------------------------------------------------------------------------
# Layouts of the outputs: one rule for the real and the fake implementations.


def _sizes(x: Tensor, channel_last: bool):
    """(B, C, T) of a 3-D sequence tensor in the given layout."""
    if channel_last:
        return x.shape[0], x.shape[2], x.shape[1]
    return x.shape[0], x.shape[1], x.shape[2]


def _state_rows(x: Tensor, cu_seqlens: Optional[Tensor]):
    return x.shape[0] if cu_seqlens is None else cu_seqlens.shape[0] - 1


def _new_sequences(like: Tensor) -> Tensor:
    # The strides of `like` when it is dense and non-overlapping (a channel-last view stays
    # channel-last, so every array of the call shares one layout and takes the fast kernels),
    # else contiguous in the tensor's own dimension order.
    return torch.empty_like(like, memory_format=torch.preserve_format)


def _new_states(like: Tensor, rows, channels) -> Tensor:
    return like.new_empty((rows, channels))


# --------------------------------------------------------------------------------------------
# The forward op.


def _new_final_state(tokens, cu_seqlens, channel_last, need_final_state):
    # (0, 0) where the caller does not want it: the kernels then write none, and calls without
    # states (no initial state either) take the kernels that have no state code (packed calls:
    # the lean windows and the dense row kernel's packed form)
    if not need_final_state:
        return _new_states(tokens, 0, 0)
    _, channels, _ = _sizes(tokens, channel_last)
    return _new_states(tokens, _state_rows(tokens, cu_seqlens), channels)


def _fwd_cuda(gates, tokens, initial_state, cu_seqlens, reverse, channel_last,
              need_final_state=True):
    out = _new_sequences(tokens)
    final_state = _new_final_state(tokens, cu_seqlens, channel_last, need_final_state)
    h0 = None if initial_state is None else initial_state.contiguous()
    _ext.load().forward(gates, tokens, out, final_state if need_final_state else None, h0,
                        cu_seqlens, reverse, channel_last)
    return out, final_state


@torch.library.custom_op("ascan::scan_fwd", mutates_args=(), device_types="cuda")
def scan_fwd(
    gates: Tensor,
    tokens: Tensor,
    initial_state: Optional[Tensor],
    cu_seqlens: Optional[Tensor],
    reverse: bool,
    channel_last: bool,
    need_final_state: bool = True,
) -> Tuple[Tensor, Tensor]:
    return _fwd_cuda(gates, tokens, initial_state, cu_seqlens, reverse, channel_last,
                     need_final_state)


@scan_fwd.register_fake
def _scan_fwd_fake(gates, tokens, initial_state, cu_seqlens, reverse, channel_last,
                   need_final_state=True):
    out = _new_sequences(tokens)
    return out, _new_final_state(tokens, cu_seqlens, channel_last, need_final_state)


# --------------------------------------------------------------------------------------------
# The backward op (one fused pass: gradients of gates, tokens and the initial state).


def _bwd_cuda(gates, states, grad_out, initial_state, grad_final_state, cu_seqlens, reverse,
              channel_last, need_grad_initial_state):
    _, channels, _ = _sizes(states, channel_last)
    grad_gates = _new_sequences(states)
    grad_tokens = _new_sequences(states)
    rows = _state_rows(states, cu_seqlens) if need_grad_initial_state else 0
    grad_h0 = _new_states(states, rows, channels if need_grad_initial_state else 0)
    h0 = None if initial_state is None else initial_state.contiguous()
    gT = None if grad_final_state is None else grad_final_state.contiguous()
    _ext.load().backward(
        gates,
        states,
        grad_out,
        grad_gates,
        grad_tokens,
        h0,
        gT,
        grad_h0 if need_grad_initial_state else None,
        cu_seqlens,
        reverse,
        channel_last,
    )
    return grad_gates, grad_tokens, grad_h0


@torch.library.custom_op("ascan::scan_bwd", mutates_args=(), device_types="cuda")
def scan_bwd(
    gates: Tensor,
    states: Tensor,
    grad_out: Tensor,
    initial_state: Optional[Tensor],
    grad_final_state: Optional[Tensor],
    cu_seqlens: Optional[Tensor],
    reverse: bool,
    channel_last: bool,
    need_grad_initial_state: bool,
) -> Tuple[Tensor, Tensor, Tensor]:
    return _bwd_cuda(gates, states, grad_out, initial_state, grad_final_state, cu_seqlens,
                     reverse, channel_last, need_grad_initial_state)


@scan_bwd.register_fake
def _scan_bwd_fake(
    gates,
    states,
    grad_out,
    initial_state,
    grad_final_state,
    cu_seqlens,
    reverse,
    channel_last,
    need_grad_initial_state,
):
    _, channels, _ = _sizes(states, channel_last)
    rows = _state_rows(states, cu_seqlens) if need_grad_initial_state else 0
    return (
        _new_sequences(states),
        _new_sequences(states),
        _new_states(states, rows, channels if need_grad_initial_state else 0),
    )


# --------------------------------------------------------------------------------------------
# Autograd of scan_fwd through scan_bwd.


def _setup_context(ctx, inputs, output):
    gates, tokens, initial_state, cu_seqlens, reverse, channel_last = inputs[:6]
    out, _ = output
    ctx.save_for_backward(gates, out, initial_state, cu_seqlens)
    ctx.reverse = reverse
    ctx.channel_last = channel_last


def _gradients(ctx, grad_out, grad_final_state, bwd):
    """The gradients of (gates, tokens, initial_state, cu_seqlens, reverse, channel_last,
    need_final_state) from those of (out, final_state), either of which may be None (no
    gradient), through `bwd`."""
    gates, out, initial_state, cu_seqlens = ctx.saved_tensors
    need_gates, need_tokens, need_h0 = ctx.needs_input_grad[:3]
    if grad_final_state is not None and grad_final_state.numel() == 0:
        # the (0, 0) final state of a call that did not ask for one, its gradient materialized
        # as zeros by the custom op's autograd: no gradient
        grad_final_state = None
    if not (need_gates or need_tokens or need_h0) or (grad_out is None and
                                                      grad_final_state is None):
        return None, None, None, None, None, None, None
    if grad_out is None:  # only the final state was used: a zero upstream gradient, broadcast
        grad_out = out.new_zeros(()).expand(out.shape)
    grad_gates, grad_tokens, grad_h0 = bwd(
        gates,
        out,
        grad_out,
        initial_state,
        grad_final_state,
        cu_seqlens,
        ctx.reverse,
        ctx.channel_last,
        bool(need_h0),
    )
    return (
        grad_gates if need_gates else None,
        grad_tokens if need_tokens else None,
        grad_h0 if need_h0 else None,
        None,
        None,
        None,
        None,
    )


def _backward(ctx, grad_out, grad_final_state):
    return _gradients(ctx, grad_out, grad_final_state, torch.ops.ascan.scan_bwd)


scan_fwd.register_autograd(_backward, setup_context=_setup_context)


# --------------------------------------------------------------------------------------------
# The eager path. Calling a torch.library custom op from Python costs its dispatch and, with
# autograd, a generated autograd Function around it: about 40 us per forward and 230 us per
# forward + backward of host time on a slow CPU, longer than the whole scan of a short sequence
# (8 x 1536 x 128 in float32 scans in 10 us on the H200). Outside torch.compile, fake tensors,
# dispatch modes and functorch transforms, ascan.scan calls the kernels directly through a plain
# autograd.Function: the same allocations, the same kernels, the same gradient formula. Traced
# code keeps the custom ops, which is what torch.compile and export need.

# Kernels by device type: forward (gates, tokens, h0, cu_seqlens, reverse, channel_last,
# need_final_state) -> (out, final_state) and backward as scan_bwd. The tests add CPU emulations
# under "cpu".
_EAGER_KERNELS = {"cuda": (_fwd_cuda, _bwd_cuda)}


class _Scan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gates, tokens, initial_state, cu_seqlens, reverse, channel_last,
                need_final_state):
        forward = _EAGER_KERNELS[tokens.device.type][0]
        out, final_state = forward(gates, tokens, initial_state, cu_seqlens, reverse,
                                   channel_last, need_final_state)
        ctx.save_for_backward(gates, out, initial_state, cu_seqlens)
        ctx.reverse = reverse
        ctx.channel_last = channel_last
        ctx.set_materialize_grads(False)  # an unused output's gradient stays None, not zeros
        return out, final_state

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out, grad_final_state):
        backward = _EAGER_KERNELS[ctx.saved_tensors[1].device.type][1]
        return _gradients(ctx, grad_out, grad_final_state, backward)


_PLAIN = (Tensor, torch.nn.Parameter)

# torch's own tests of a dispatch mode (FakeTensorMode, debug modes) and of functorch transforms;
# a torch without them keeps every call on the custom ops.
try:
    from torch.utils._python_dispatch import is_in_torch_dispatch_mode as _in_dispatch_mode
except ImportError:  # pragma: no cover
    def _in_dispatch_mode() -> bool:
        return True
_in_functorch = getattr(torch._C, "_are_functorch_transforms_active", lambda: True)


def _eager(gates, tokens, initial_state, cu_seqlens) -> bool:
    """Whether ascan.scan may call the kernels directly (see above)."""
    return (
        type(gates) in _PLAIN
        and type(tokens) in _PLAIN
        and (initial_state is None or type(initial_state) in _PLAIN)
        and (cu_seqlens is None or type(cu_seqlens) in _PLAIN)
        and tokens.device.type in _EAGER_KERNELS
        and not torch.compiler.is_compiling()
        and not _in_dispatch_mode()
        and not _in_functorch()
    )


# --------------------------------------------------------------------------------------------
# The public function and its checks.


def _name_of(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _check_tensor(name: str, x, device) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"ascan.scan: {name} must be a torch.Tensor, got {type(x).__name__}")
    if x.device.type not in _DEVICE_TYPES:
        raise ValueError(
            f"ascan.scan: {name} is on {x.device}; ascan runs on CUDA tensors only and never "
            f"copies them there (move them with .cuda() first)"
        )
    if device is not None and x.device != device:
        raise ValueError(f"ascan.scan: {name} is on {x.device} but gates is on {device}")


def _check_args(gates, tokens, initial_state, reverse, return_final_state, layout, cu_seqlens):
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(f"ascan.scan: layout must be 'bct' or 'btc', got {layout!r}")
    for flag, value in (("reverse", reverse), ("return_final_state", return_final_state)):
        if not isinstance(value, bool):
            raise TypeError(f"ascan.scan: {flag} must be a bool, got {type(value).__name__}")
    _check_tensor("gates", gates, None)
    _check_tensor("tokens", tokens, gates.device)
    if gates.dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"ascan.scan: gates has dtype {_name_of(gates.dtype)}; ascan takes float32, "
            f"float64, float16 or bfloat16"
        )
    if tokens.dtype != gates.dtype:
        raise TypeError(
            f"ascan.scan: tokens has dtype {_name_of(tokens.dtype)} but gates has "
            f"{_name_of(gates.dtype)} (ascan does not cast; convert one of them)"
        )
    built = _ext.compiled_dtypes()
    if built is not None and _name_of(gates.dtype) not in built:
        raise TypeError(
            f"ascan.scan: gates has dtype {_name_of(gates.dtype)}, which this build of ascan._C "
            f"has no kernels for (it has {', '.join(built)}; rebuild with ASCAN_DTYPES)"
        )
    dims = "(B, T, C)" if layout == "btc" else "(B, C, T)"
    if gates.dim() != 3:
        raise ValueError(
            f"ascan.scan: gates must be 3-D {dims} for layout {layout!r}, got shape "
            f"{tuple(gates.shape)}"
        )
    if tokens.shape != gates.shape:
        raise ValueError(
            f"ascan.scan: tokens has shape {tuple(tokens.shape)} but gates has "
            f"{tuple(gates.shape)}; they must match (ascan does not broadcast shapes: expand() "
            f"an input to the full shape, which costs no copy)"
        )
    batch, channels, _ = _sizes(gates, layout == "btc")
    rows = batch
    if cu_seqlens is not None:
        if not isinstance(cu_seqlens, Tensor):
            raise TypeError(
                f"ascan.scan: cu_seqlens must be a torch.Tensor, got {type(cu_seqlens).__name__}"
            )
        if cu_seqlens.dtype not in (torch.int32, torch.int64):
            raise TypeError(
                f"ascan.scan: cu_seqlens has dtype {_name_of(cu_seqlens.dtype)}; it must be "
                f"int32 or int64"
            )
        if cu_seqlens.device != gates.device:
            raise ValueError(
                f"ascan.scan: cu_seqlens is on {cu_seqlens.device} but gates is on "
                f"{gates.device} (the offsets are read on the GPU)"
            )
        if cu_seqlens.dim() != 1 or cu_seqlens.shape[0] < 2:
            raise ValueError(
                f"ascan.scan: cu_seqlens must be 1-D with N + 1 >= 2 offsets, got shape "
                f"{tuple(cu_seqlens.shape)}"
            )
        if not cu_seqlens.is_contiguous():
            raise ValueError("ascan.scan: cu_seqlens must be contiguous (call .contiguous())")
        if batch != 1:
            packed = "(1, total, C)" if layout == "btc" else "(1, C, total)"
            raise ValueError(
                f"ascan.scan: with cu_seqlens the sequences are packed along time: gates must be "
                f"{packed}, got shape {tuple(gates.shape)}"
            )
        rows = cu_seqlens.shape[0] - 1
    if initial_state is not None:
        _check_tensor("initial_state", initial_state, gates.device)
        if initial_state.dtype != gates.dtype:
            raise TypeError(
                f"ascan.scan: initial_state has dtype {_name_of(initial_state.dtype)} but gates "
                f"has {_name_of(gates.dtype)}"
            )
        if initial_state.shape != (rows, channels):
            what = "(N, C) with N = len(cu_seqlens) - 1" if cu_seqlens is not None else "(B, C)"
            raise ValueError(
                f"ascan.scan: initial_state must be {what} = {(rows, channels)}, got "
                f"{tuple(initial_state.shape)}"
            )


def scan(
    gates: Tensor,
    tokens: Tensor,
    *,
    initial_state: Optional[Tensor] = None,
    reverse: bool = False,
    return_final_state: bool = False,
    layout: str = "bct",
    cu_seqlens: Optional[Tensor] = None,
):
    """Solve x[t] = gates[t] * x[t-1] + tokens[t] along time for every (batch, channel).

    Arguments:
        gates, tokens: CUDA tensors of one shape and dtype (float32, float64, float16 or
            bfloat16): (B, C, T) for layout="bct" (time last, the fastest layout), (B, T, C) for
            layout="btc" (channels last, as HGRN, Griffin and Mamba-2 layers hold them). Any
            strides: views of a fused projection and expand()ed (stride-0) inputs are read in
            place, never copied.
        initial_state: optional (B, C) state x[-1] (x[T] when reversed), or (N, C) with
            cu_seqlens; 0 when None. Made contiguous if it is not (a (B, C) copy).
        reverse: scan from the end: x[t] = gates[t] * x[t+1] + tokens[t].
        return_final_state: also return the last state, (B, C) (or (N, C)): x[T-1], or x[0]
            when reversed.
        layout: "bct" or "btc", the meaning of the three dimensions.
        cu_seqlens: optional int32/int64 CUDA tensor of N + 1 offsets: N sequences packed end
            to end along time in a batch of 1 ((1, C, total) or (1, total, C)), as
            FlashAttention and flash-linear-attention pass them. Each sequence starts from its
            own initial state and nothing crosses a boundary.

    Returns the states x, a tensor of the inputs' shape and dtype (laid out as tokens when tokens
    is dense, else contiguous), and with return_final_state a tuple (x, final_state).

    Differentiable in gates, tokens and initial_state (and through the final state) by ascan's
    fused backward pass. Runs on the inputs' device, on its current stream; 16-bit inputs are
    scanned in float32 and rounded once. Errors (wrong device, dtype, shape) raise before
    anything runs.
    """
    _check_args(gates, tokens, initial_state, reverse, return_final_state, layout, cu_seqlens)
    channel_last = layout == "btc"
    # the final state only where it is returned: without it (and without an initial state)
    # packed calls take the kernels that have no state code
    need_final_state = return_final_state
    if not _eager(gates, tokens, initial_state, cu_seqlens):
        out, final_state = torch.ops.ascan.scan_fwd(
            gates, tokens, initial_state, cu_seqlens, reverse, channel_last, need_final_state
        )
    elif torch.is_grad_enabled() and (
        gates.requires_grad
        or tokens.requires_grad
        or (initial_state is not None and initial_state.requires_grad)
    ):
        out, final_state = _Scan.apply(gates, tokens, initial_state, cu_seqlens, reverse,
                                       channel_last, need_final_state)
    else:
        forward = _EAGER_KERNELS[tokens.device.type][0]
        out, final_state = forward(gates, tokens, initial_state, cu_seqlens, reverse,
                                   channel_last, need_final_state)
    if return_final_state:
        return out, final_state
    return out
