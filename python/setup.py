"""Build of ascan._C, the CUDA half of the ascan package (see README.md beside this file).

Environment:
  ASCAN_CUDA_ARCHS   CUDA architectures, CMake style: "90", "80;90", "90a" (default: those of
                     the GPUs torch sees, else "80;90")
  ASCAN_DTYPES       dtypes to compile: any of float32, float64, float16, bfloat16 (or f32, f64,
                     f16, bf16), comma or semicolon separated (default: all four)
  ASCAN_INCLUDE_DIR  ascan's headers (default: ../include, the source tree this folder is in)
  MAX_JOBS           parallel compile jobs (torch's cpp_extension with ninja)
  ASCAN_SKIP_CUDA=1  install the Python package alone, without ascan._C (CPU-side tests only)
"""

import os
import re
import sys
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent

DTYPES = {  # name: (short name, macro)
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "bfloat16": "bf16",
}
ALIASES = {"f32": "float32", "float": "float32", "f64": "float64", "double": "float64",
           "f16": "float16", "half": "float16", "bf16": "bfloat16"}


def requested_dtypes():
    raw = os.environ.get("ASCAN_DTYPES", "").strip()
    if not raw:
        return list(DTYPES)
    names = []
    for item in re.split(r"[,;\s]+", raw):
        if not item:
            continue
        name = ALIASES.get(item.lower(), item.lower())
        if name not in DTYPES:
            sys.exit(f"ASCAN_DTYPES: unknown dtype {item!r} (take {', '.join(DTYPES)})")
        if name not in names:
            names.append(name)
    if not names:
        sys.exit("ASCAN_DTYPES names no dtype")
    return names


def requested_archs():
    raw = os.environ.get("ASCAN_CUDA_ARCHS", "").strip()
    if raw:
        archs = [a for a in re.split(r"[,;\s]+", raw) if a]
    else:
        import torch

        archs = []
        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                major, minor = torch.cuda.get_device_capability(i)
                archs.append(f"{major}{minor}")
        if not archs:
            archs = ["80", "90"]
    flags = []
    for a in dict.fromkeys(archs):
        a = a.replace("sm_", "").replace(".", "")
        if not re.fullmatch(r"\d{2,3}[af]?", a):
            sys.exit(f"ASCAN_CUDA_ARCHS: cannot read {a!r} (write e.g. 80;90 or 90a)")
        flags.append(f"-gencode=arch=compute_{a},code=sm_{a}")
    return archs, flags


def extension():
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension

    include = Path(os.environ.get("ASCAN_INCLUDE_DIR", HERE.parent / "include")).resolve()
    if not (include / "ascan" / "ascan.cuh").is_file():
        sys.exit(f"ascan's headers are not under {include} (set ASCAN_INCLUDE_DIR)")
    dtypes = requested_dtypes()
    archs, arch_flags = requested_archs()
    print(f"ascan._C: dtypes {', '.join(dtypes)}; CUDA architectures {';'.join(archs)}")
    sources = ["csrc/ascan_ext.cpp"]
    macros = []
    for name in dtypes:
        short = DTYPES[name]
        sources += [f"csrc/fwd_{short}.cu", f"csrc/bwd_{short}.cu"]
        macros.append((f"ASCAN_PY_{short.upper()}", "1"))
    nvcc = [
        "-O3",
        "-std=c++17",
        "-lineinfo",
        # torch's defaults switch off the __half / __nv_bfloat16 operators that ascan's headers use
        "-U__CUDA_NO_HALF_OPERATORS__",
        "-U__CUDA_NO_HALF_CONVERSIONS__",
        "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
        "-U__CUDA_NO_HALF2_OPERATORS__",
    ] + arch_flags
    ext = CUDAExtension(
        name="ascan._C",
        sources=sources,
        include_dirs=[str(include), str(HERE / "csrc")],
        define_macros=macros,
        extra_compile_args={"cxx": ["-O2", "-std=c++17"], "nvcc": nvcc},
    )
    return [ext], {"build_ext": BuildExtension}


if os.environ.get("ASCAN_SKIP_CUDA") == "1":
    setup()
else:
    ext_modules, cmdclass = extension()
    setup(ext_modules=ext_modules, cmdclass=cmdclass)
