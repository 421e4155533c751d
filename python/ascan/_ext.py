"""Loading of ascan._C, the compiled CUDA kernels. The package imports without it (the ops, their
fake implementations and the argument checks are pure Python); running a scan needs it. The
import is tried once, when ascan is imported, so that code traced by torch.compile only reads
its result."""

import torch  # noqa: F401  (loads libtorch, which ascan._C links against)

try:
    from . import _C as _module  # built by setup.py

    _error = None
    _dtypes = tuple(_module.compiled_dtypes())
except ImportError as e:  # not built, or built against another torch
    _module = None
    _error = e
    _dtypes = None


def load():
    """ascan._C, or a RuntimeError that says how to build it."""
    if _module is None:
        raise RuntimeError(
            "ascan._C (ascan's compiled CUDA kernels) is not available: build the package with "
            "`pip install --no-build-isolation ./python` on a machine with the CUDA toolkit and a "
            f"CUDA build of PyTorch ({_error})"
        )
    return _module


def compiled_dtypes():
    """The dtype names ascan._C has kernels for, or None when it is not built."""
    return None if _module is None else list(_dtypes)
