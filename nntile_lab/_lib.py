"""Load the compiled extension (StarPU glue + C kernels) with a helpful error."""
import ctypes
import os

_HOW = ("nntile_lab's compiled extension could not be loaded ({why}).\n"
        "Install StarPU 1.3 and build the package:\n"
        "  apt-get install libstarpu-dev pkg-config   # Debian/Ubuntu, as root\n"
        "  pip install -e .                           # from the nntile_lab checkout\n"
        "or run ./scripts/setup.sh, which does both.")

try:
    import scipy_openblas32
    # The kernels call scipy_cblas_*; the library is not linked at build time
    # (the build env is throw-away), so load it globally before the extension.
    _blas = ctypes.CDLL(os.path.join(scipy_openblas32.get_lib_dir(),
                                     f"lib{scipy_openblas32.get_library()}.so"),
                        mode=ctypes.RTLD_GLOBAL)
    from nntile_lab._ext import ffi, lib
except (ImportError, OSError) as exc:
    raise ImportError(_HOW.format(why=exc)) from exc

# One thread per task: StarPU's workers are the parallelism. This touches only the
# kernels' BLAS, not numpy's own, so numpy baselines keep all cores.
_blas.scipy_openblas_set_num_threads(1)

__all__ = ["ffi", "lib"]
