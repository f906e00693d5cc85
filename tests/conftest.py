"""Test fixtures: one runtime per scheduler, shared by a module's tests.

StarPU allows one runtime per process, so the fixture is module-scoped and
parametrised: pytest groups the tests by scheduler and restarts StarPU between
groups (a cycle costs ~20 ms).
"""
import os
import tempfile

# StarPU keeps performance models and bus calibration in $STARPU_HOME and rewrites
# them at shutdown: a test session gets its own, so that another StarPU process
# (a notebook, a training run) never reads a file this one is writing
os.environ.setdefault("STARPU_HOME", tempfile.mkdtemp(prefix="nntile_lab_starpu_"))

import numpy as np  # noqa: E402
import pytest
from hypothesis import HealthCheck, settings

import nntile_lab as nl

SCHEDULERS = ("eager", "dmda", "lws")
settings.register_profile(
    "default", max_examples=int(os.environ.get("NNTILE_LAB_EXAMPLES", "25")), deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
settings.load_profile("default")


@pytest.fixture(scope="module", params=SCHEDULERS)
def rt(request):
    with nl.Runtime(scheduler=request.param, ncpu=2) as runtime:
        yield runtime


@pytest.fixture
def rt1():
    """Any runtime, for tests where the scheduler does not matter: the one running
    (a module's ``rt``) or a fresh lws one for this test."""
    if nl.Runtime.active is not None:
        yield nl.Runtime.active
        return
    with nl.Runtime(scheduler="lws", ncpu=2) as runtime:
        yield runtime


def rel_err(got, want) -> float:
    """Norm-wise relative error ‖got − want‖ / ‖want‖ (float64 reference)."""
    want = np.asarray(want, np.float64)
    den = np.linalg.norm(want)
    return float(np.linalg.norm(np.asarray(got, np.float64) - want) / (den if den else 1.0))


def cond_err(got, want, magnitude) -> float:
    """‖got − want‖ / ‖magnitude‖ where ``magnitude`` is the sum of the absolute
    terms behind ``want`` (e.g. |α|·|A|·|B| + |β|·|C|): the error float32 rounding
    allows when terms cancel, where a plain relative error would blame the kernel."""
    den = np.linalg.norm(np.asarray(magnitude, np.float64))
    diff = np.asarray(got, np.float64) - np.asarray(want, np.float64)
    return float(np.linalg.norm(diff) / (den if den else 1.0))


def require(module: str):
    """Import a test dependency, or fail loudly with the fix: a missing part never turns
    into a skipped (and so silently passing) test."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        pytest.fail(f"{module} is missing ({exc}): `scripts/setup.sh test` installs the "
                    f"test extras", pytrace=False)


def need_opencl() -> None:
    """Fail (never skip) where this build or machine has no OpenCL device; stop a runtime a
    previous test left running (StarPU allows one per process)."""
    from nntile_lab._lib import lib
    from nntile_lab.runtime import opencl_devices
    if not lib.nl_opencl_built() or opencl_devices() < 1:
        pytest.fail("no OpenCL device (or a build without OpenCL): run scripts/setup.sh "
                    "(pocl-opencl-icd, libclblast-dev), rebuild, check `clinfo -l`",
                    pytrace=False)
    if nl.Runtime.active is not None:
        nl.Runtime.active.stop()


@pytest.fixture(scope="module")
def ocl():
    """A mixed runtime, one CPU and one OpenCL worker, shared by a module's tests."""
    need_opencl()
    with nl.Runtime(scheduler="dmda", ncpu=1, nopencl=1) as runtime:
        yield runtime


def _namespace_cluster(hosts: int):
    """A module's own cluster of network-namespace hosts on 1 Gbit/s links
    (scripts/cluster.sh, tests/netns_cluster.py): up before its first test, down after its
    last; FAILS (never skips) where the machine cannot make namespaces."""
    from tests import netns_cluster
    cluster = netns_cluster.up(hosts, gbit=1)
    yield cluster
    netns_cluster.down(cluster)


@pytest.fixture(scope="module")
def cluster2():
    yield from _namespace_cluster(2)


@pytest.fixture(scope="module")
def cluster4():
    yield from _namespace_cluster(4)
