"""A drop-in for accelerated-scan: `from ascan.accelerated_scan import scan` (or
`ascan.accelerated_scan.warp` / `.scalar`) in place of `from accelerated_scan.warp import scan`.

scan(gates, tokens) takes (B, C, T) tensors and returns x with x[t] = gates[t] * x[t-1] +
tokens[t], x[-1] = 0, differentiable in gates and tokens, as accelerated-scan's does; unlike it,
T need not be a power of two, the inputs need not be contiguous, and float64 is accepted.
"""

from .._ops import scan as _scan


def scan(gates, tokens):
    """Solve x[t] = gates[t] * x[t-1] + tokens[t] over (B, C, T) tensors (accelerated-scan's
    signature and semantics, by ascan's kernels)."""
    return _scan(gates, tokens)


__all__ = ["scan"]
