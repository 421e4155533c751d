"""A CPU stand-in for ascan's CUDA kernels, for the tests only: plain PyTorch loops with the
library's forward and backward formulas (README: "The backward pass"), registered as the CPU
kernels of ascan::scan_fwd and ascan::scan_bwd. With it, the CPU tests run the real op
registrations, the autograd wiring, opcheck, gradcheck and torch.compile without a GPU; on a
GPU the same formulas serve as the float64 reference of the backward pass."""

import torch

from ascan.reference import scan_loop

_registered = False


def _bct(x, channel_last):
    return x.transpose(1, 2) if channel_last else x


def backward_formula(gates, states, grad_out, h0, gT, reverse):
    """dL/dgates, dL/dtokens, dL/dh0 of one batch of (B, C, L) sequences, in the inputs' dtype:
    d[t] = a[t+1] d[t+1] + g[t], d[L-1] = g[L-1] + gT; dL/db = d, dL/da[t] = d[t] x[t-1]
    (x[-1] = h0), dL/dh0 = a[0] d[0]; a reverse scan mirrors every index."""
    B, C, L = states.shape
    zeros = states.new_zeros((B, C))
    h0 = zeros if h0 is None else h0
    gT = zeros if gT is None else gT
    if L == 0:
        return states.new_zeros(states.shape), states.new_zeros(states.shape), gT.clone()
    a, x, g = gates, states, grad_out
    if reverse:
        a, x, g = a.flip(2), x.flip(2), g.flip(2)
    a_next = torch.cat([a[:, :, 1:], states.new_ones((B, C, 1))], dim=2)
    d = scan_loop(a_next, g, initial_state=gT, reverse=True)
    x_prev = torch.cat([h0[:, :, None], x[:, :, :-1]], dim=2)
    grad_gates = d * x_prev
    grad_h0 = a[:, :, 0] * d[:, :, 0]
    if reverse:
        grad_gates, d = grad_gates.flip(2), d.flip(2)
    return grad_gates, d, grad_h0


def backward_reference(gates, states, grad_out, initial_state, grad_final_state, cu_seqlens,
                       reverse, channel_last, dtype=None):
    """The backward pass of ascan.scan over (B, C, T) or (B, T, C) tensors, packed or not,
    computed in `dtype` (default: the inputs'), returned in the layout of the inputs."""
    dtype = dtype or states.dtype
    a = _bct(gates, channel_last).to(dtype)
    x = _bct(states, channel_last).to(dtype)
    g = _bct(grad_out, channel_last).to(dtype)
    h0 = None if initial_state is None else initial_state.to(dtype)
    gT = None if grad_final_state is None else grad_final_state.to(dtype)
    if cu_seqlens is None:
        ga, gb, gh0 = backward_formula(a, x, g, h0, gT, reverse)
    else:
        offsets = [int(o) for o in cu_seqlens.tolist()]
        parts = []
        for n, (lo, hi) in enumerate(zip(offsets[:-1], offsets[1:])):
            parts.append(backward_formula(
                a[:, :, lo:hi], x[:, :, lo:hi], g[:, :, lo:hi],
                None if h0 is None else h0[n:n + 1], None if gT is None else gT[n:n + 1],
                reverse))
        ga = torch.cat([p[0] for p in parts], dim=2)
        gb = torch.cat([p[1] for p in parts], dim=2)
        gh0 = torch.cat([p[2] for p in parts], dim=0)
    return _bct(ga, channel_last), _bct(gb, channel_last), gh0


def _compute_dtype(dtype):
    # as the library: 16-bit types computed in float32 and rounded once
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _fwd_cpu(gates, tokens, initial_state, cu_seqlens, reverse, channel_last,
             need_final_state=True):
    out, final = scan_loop(gates, tokens, initial_state=initial_state, reverse=reverse,
                           return_final_state=True, layout="btc" if channel_last else "bct",
                           cu_seqlens=cu_seqlens, dtype=_compute_dtype(tokens.dtype))
    result = torch.empty_like(tokens, memory_format=torch.preserve_format)
    result.copy_(out)
    if not need_final_state:
        return result, tokens.new_empty((0, 0))
    return result, final.to(tokens.dtype).contiguous().clone()


def _bwd_cpu(gates, states, grad_out, initial_state, grad_final_state, cu_seqlens, reverse,
             channel_last, need_grad_initial_state):
    ga, gb, gh0 = backward_reference(gates, states, grad_out, initial_state, grad_final_state,
                                     cu_seqlens, reverse, channel_last,
                                     dtype=_compute_dtype(states.dtype))
    grad_gates = torch.empty_like(states, memory_format=torch.preserve_format)
    grad_tokens = torch.empty_like(states, memory_format=torch.preserve_format)
    grad_gates.copy_(ga)
    grad_tokens.copy_(gb)
    if not need_grad_initial_state:
        gh0 = states.new_empty((0, 0))
    return grad_gates, grad_tokens, gh0.to(states.dtype).contiguous().clone()


def register():
    """Register the CPU stand-ins (once per process)."""
    global _registered
    if _registered:
        return
    from ascan import _ops

    _ops.scan_fwd.register_kernel("cpu")(_fwd_cpu)
    _ops.scan_bwd.register_kernel("cpu")(_bwd_cpu)
    _ops._EAGER_KERNELS["cpu"] = (_fwd_cpu, _bwd_cpu)  # ascan.scan's eager path
    _registered = True
