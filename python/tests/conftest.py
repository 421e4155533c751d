import os
import sys

import pytest
import torch

# The tests take the ascan that Python finds (an installed one, `pip install ./python`, or the
# source tree when run from python/ with `python -m pytest`), else the source tree's (without a
# built ascan._C: the GPU tests then skip).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import ascan
except ImportError:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import ascan


def pytest_report_header(config):
    built = ascan.compiled_dtypes()
    return (f"ascan {ascan.__version__} from {os.path.dirname(ascan.__file__)}; ascan._C: "
            f"{', '.join(built) if built else 'not built'}; torch {torch.__version__}, "
            f"CUDA GPU: {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}")


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
    from ascan import _ext, _ops

    cpu_kernels.register()
    monkeypatch.setattr(_ops, "_DEVICE_TYPES", ("cuda", "cpu"))
    monkeypatch.setattr(_ext, "compiled_dtypes", lambda: None)  # any build's dtypes
    return cpu_kernels
