# The cffi extension is declared here: pyproject.toml has no key for cffi_modules.
# One module per CPU variant (nntile_lab/cpu_variant.py): nntile_lab._lib loads the best
# one this CPU runs, so one wheel is fast on AVX2 and on AVX-512 machines.
import os
import sys

from setuptools import setup

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nntile_lab.cpu_variant import build_variants  # noqa: E402

setup(cffi_modules=[f"kernels/build.py:ffibuilder_{name}" for name in build_variants()])
