"""Plain PyTorch references for ascan.scan: a sequential loop over time (vectorized over
batch and channels), on any device, differentiable by autograd. For tests and for small T; the
loop launches a few kernels per time step."""

from typing import Optional

import torch
from torch import Tensor


def _to_bct(x: Tensor, layout: str) -> Tensor:
    return x.transpose(1, 2) if layout == "btc" else x


def scan_loop(
    gates: Tensor,
    tokens: Tensor,
    *,
    initial_state: Optional[Tensor] = None,
    reverse: bool = False,
    return_final_state: bool = False,
    layout: str = "bct",
    cu_seqlens: Optional[Tensor] = None,
    dtype: Optional[torch.dtype] = None,
):
    """ascan.scan's result by a loop over time, computed in `dtype` (default: the inputs' own)
    and returned in it. Same arguments as ascan.scan; cu_seqlens is read on the host."""
    if layout not in ("bct", "btc"):
        raise ValueError(f"layout must be 'bct' or 'btc', got {layout!r}")
    dtype = dtype or tokens.dtype
    a = _to_bct(gates, layout).to(dtype)
    b = _to_bct(tokens, layout).to(dtype)
    h0 = None if initial_state is None else initial_state.to(dtype)
    if cu_seqlens is None:
        segments = [(0, b.shape[2])]
        batch_rows = [slice(None)]
    else:
        offsets = [int(o) for o in cu_seqlens.tolist()]
        segments = list(zip(offsets[:-1], offsets[1:]))
        batch_rows = [slice(0, 1)] * len(segments)
    outs = []
    finals = []
    for n, ((lo, hi), rows) in enumerate(zip(segments, batch_rows)):
        aa = a[rows, :, lo:hi]
        bb = b[rows, :, lo:hi]
        if h0 is None:
            x = torch.zeros(aa.shape[:2], dtype=dtype, device=aa.device)
        else:
            x = h0 if cu_seqlens is None else h0[n : n + 1]
        steps = range(hi - lo - 1, -1, -1) if reverse else range(hi - lo)
        xs = [None] * (hi - lo)
        for t in steps:
            x = aa[:, :, t] * x + bb[:, :, t]
            xs[t] = x
        outs.append(torch.stack(xs, dim=2) if xs else bb.new_zeros(bb.shape))
        finals.append(x)
    out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)
    final = finals[0] if len(finals) == 1 else torch.cat(finals, dim=0)
    if layout == "btc":
        out = out.transpose(1, 2)
    if return_final_state:
        return out, final
    return out
