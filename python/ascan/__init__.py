"""ascan for PyTorch: first-order linear recurrences x[t] = a[t] * x[t-1] + b[t] on NVIDIA GPUs.

    import ascan
    x = ascan.scan(gates, tokens)                      # (B, C, T) CUDA tensors
    x, h = ascan.scan(gates, tokens, initial_state=h0, return_final_state=True, layout="btc")

See ascan.scan. The ops are torch.library custom ops (ascan::scan_fwd, ascan::scan_bwd) with fake
implementations and autograd, so torch.compile(fullgraph=True) and CUDA graphs take them.
"""

from . import _ext
from ._ops import SUPPORTED_DTYPES, scan

__version__ = "0.1.0"
__all__ = ["scan", "is_available", "compiled_dtypes", "SUPPORTED_DTYPES", "reference"]


def is_available() -> bool:
    """Whether scans can run here: ascan._C is built and torch sees a CUDA GPU."""
    import torch

    return _ext.compiled_dtypes() is not None and torch.cuda.is_available()


def compiled_dtypes():
    """The dtypes the compiled kernels cover (ASCAN_DTYPES at build time), or None if unbuilt."""
    return _ext.compiled_dtypes()


from . import reference  # noqa: E402
