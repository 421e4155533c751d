#!/usr/bin/env bash
# python/bench/fetch_wheels.sh: (re)download the peers of bench/peers.py for a machine without
# network: pure-Python wheels (about 1.2 MB together) plus ninja's (accelerated-scan's warp kernel
# is JIT-compiled by torch at import, which needs ninja). Install them there with
#   pip install --no-deps --no-index python/bench/wheels/*.whl
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
mkdir -p wheels
pip download --no-deps -d wheels accelerated-scan==0.3.1 fla-core==0.6.0 einops==0.8.2
pip download --no-deps --only-binary=:all: --platform manylinux_2_17_x86_64 \
  --python-version 3.12 -d wheels ninja==1.13.2
ls -l wheels
