"""The compiled extension, one module per CPU variant (``v3.*.so``, ``v4.*.so``, ...).

Import :mod:`nntile_lab._lib`, never these modules: it loads the BLAS the kernels call
first, then the variant this CPU runs best (:mod:`nntile_lab.cpu_variant`).
"""
