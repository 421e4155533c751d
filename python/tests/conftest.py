import os
import sys

import pytest
import torch

# Run from the source tree without installing: python/ on the path (an installed ascan, e.g. from
# `pip install ./python`, is used when this path has no compiled extension and it does).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ascan  # noqa: E402


def gpu_skip_reason():
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to torch"
    if ascan.compiled_dtypes() is None:
        return "ascan._C is not built (pip install --no-build-isolation ./python)"
    return None


requires_gpu = pytest.mark.skipif(gpu_skip_reason() is not None,
                                  reason=gpu_skip_reason() or "")


@pytest.fixture
def cpu_ops(monkeypatch):
    """ascan's ops with the CPU stand-in kernels, and ascan.scan accepting CPU tensors."""
    import cpu_kernels
    from ascan import _ops

    cpu_kernels.register()
    monkeypatch.setattr(_ops, "_DEVICE_TYPES", ("cuda", "cpu"))
    return cpu_kernels
