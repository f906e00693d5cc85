# The cffi extension is declared here: pyproject.toml has no key for cffi_modules.
from setuptools import setup

setup(cffi_modules=["kernels/build.py:ffibuilder"])
