"""Load the compiled extension (StarPU glue + C kernels) with a helpful error.

The extension is built once per CPU variant (:mod:`nntile_lab.cpu_variant`); this module
loads the one this CPU runs best, or the one ``NNTILE_LAB_CPU_VARIANT`` names. ``VARIANT``
and ``EXT_FILE`` say which was loaded.
"""
import ctypes
import importlib
import importlib.util
import os

from nntile_lab import cpu_variant

_HOW = ("nntile_lab's compiled extension could not be loaded ({why}).\n"
        "Install StarPU 1.3 and build the package:\n"
        "  apt-get install libstarpu-dev pkg-config   # Debian/Ubuntu, as root\n"
        "  pip install -e .                           # from the nntile_lab checkout\n"
        "or run ./scripts/setup.sh, which does both.")


def built_variants() -> list[str]:
    """The variants of the extension this install has."""
    names = [cpu_variant.CUSTOM, cpu_variant.GENERIC, *cpu_variant.X86_64]
    try:
        return [n for n in names if importlib.util.find_spec(f"nntile_lab._ext.{n}")]
    except ImportError:   # nntile_lab._ext itself cannot be imported
        return []


_BUILT = built_variants()
if not _BUILT:
    raise ImportError(_HOW.format(why="nntile_lab/_ext holds no compiled module"))
# a wrong NNTILE_LAB_CPU_VARIANT, or a CPU below x86-64-v3: its own error and fix
VARIANT = cpu_variant.choose(_BUILT, cpu_variant.cpu_flags(),
                             os.environ.get(cpu_variant.ENV) or None)
try:
    import scipy_openblas32
    # The kernels call scipy_cblas_*; the library is not linked at build time
    # (the build env is throw-away), so load it globally before the extension.
    _blas = ctypes.CDLL(os.path.join(scipy_openblas32.get_lib_dir(),
                                     f"lib{scipy_openblas32.get_library()}.so"),
                        mode=ctypes.RTLD_GLOBAL)
    _ext = importlib.import_module(f"nntile_lab._ext.{VARIANT}")
    ffi, lib = _ext.ffi, _ext.lib
    EXT_FILE = _ext.__file__
except (ImportError, OSError) as exc:
    raise ImportError(_HOW.format(why=exc)) from exc

# One thread per task: StarPU's workers are the parallelism. This touches only the
# kernels' BLAS, not numpy's own, so numpy baselines keep all cores.
_blas.scipy_openblas_set_num_threads(1)

__all__ = ["EXT_FILE", "VARIANT", "ffi", "lib"]
