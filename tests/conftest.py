"""Test fixtures: one runtime per scheduler, shared by a module's tests.

StarPU allows one runtime per process, so the fixture is module-scoped and
parametrised: pytest groups the tests by scheduler and restarts StarPU between
groups (a cycle costs ~20 ms).
"""
import os
import signal
import tempfile

# StarPU keeps performance models and bus calibration in $STARPU_HOME and rewrites
# them at shutdown: a test session gets its own, so that another StarPU process
# (a notebook, a training run) never reads a file this one is writing
os.environ.setdefault("STARPU_HOME", tempfile.mkdtemp(prefix="nntile_lab_starpu_"))
# a suite started in the background of a non-interactive shell (`make test &`, a CI job)
# inherits SIGINT ignored, and so would every child it spawns: the Ctrl-C tests need it live
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import pytest
from hypothesis import HealthCheck, settings

import nntile_lab as nl
from tests.tolerance import cond_err, rel_err  # noqa: F401  (where older tests import them)

SCHEDULERS = ("eager", "dmda", "lws")
# Hypothesis: `make test` draws the same examples on every run and every machine
# (derandomize: the examples follow from each test's name), so that a newcomer's run is the
# one CI passed, and no example database carries a failure from one run into the next.
# NNTILE_LAB_HYPOTHESIS=explore draws new examples each run (a seed printed with any
# failure replays it: `--hypothesis-seed=N`), to look for what the fixed ones miss;
# scripts/test_repeatedly.sh runs both. NNTILE_LAB_EXAMPLES sets the examples per test.
_COMMON = dict(max_examples=int(os.environ.get("NNTILE_LAB_EXAMPLES", "25")), deadline=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture,
                                      HealthCheck.too_slow])
settings.register_profile("default", derandomize=True, database=None, **_COMMON)
settings.register_profile("explore", derandomize=False, database=None, print_blob=True,
                          **_COMMON)
settings.load_profile(os.environ.get("NNTILE_LAB_HYPOTHESIS", "default"))


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
