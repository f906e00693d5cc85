"""A cluster of network-namespace hosts for tests (``scripts/cluster.sh``), and helpers to run
``nntile-lab`` on it.

``make_cluster(n, gbit=...)`` brings up n hosts named uniquely for this test process (several
engineers' test runs share the machine), owned by it (``cluster.sh gc`` removes clusters whose
owner is gone), and takes them down again. Where the machine cannot make namespaces the test
FAILS with cluster.sh's reason: the multi-host path is a part of the project, never skipped.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "cluster.sh"
_count = 0


@dataclass
class Cluster:
    name: str
    hosts: list[str]
    hostfile: str
    gbit: float

    def sh(self, *args, check=True) -> subprocess.CompletedProcess:
        """``scripts/cluster.sh ARGS`` (e.g. ``link nl-h2 down``)."""
        proc = subprocess.run(["bash", str(SCRIPT), *map(str, args)], capture_output=True,
                              text=True, timeout=60)
        if check and proc.returncode:
            pytest.fail(f"cluster.sh {' '.join(map(str, args))}: {proc.stderr.strip()}",
                        pytrace=False)
        return proc

    def in_host(self, host: str, *cmd, timeout=60) -> subprocess.CompletedProcess:
        return subprocess.run(["ip", "netns", "exec", host, *map(str, cmd)],
                              capture_output=True, text=True, timeout=timeout)

    def link_bytes(self, host: str) -> tuple[int, int]:
        """(sent, received) bytes on ``host``'s eth0: what crossed its link."""
        base = "/sys/class/net/eth0/statistics"
        out = self.in_host(host, "cat", f"{base}/tx_bytes", f"{base}/rx_bytes").stdout.split()
        return int(out[0]), int(out[1])

    def pids(self, host: str) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", host], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def hostfile_with(self, hosts: list[str], slots: int = 1, path: Path | None = None) -> str:
        """A hostfile naming only ``hosts`` (the cluster's ``# mca`` lines kept)."""
        keep = [ln for ln in Path(self.hostfile).read_text().splitlines() if ln.startswith("#")]
        path = path or Path(self.hostfile).with_name(f"hostfile-{len(hosts)}-{slots}")
        path.write_text("\n".join([*keep, *(f"{h} slots={slots}" for h in hosts)]) + "\n")
        return str(path)


def _unique_name() -> str:
    """A 1-6 character name unique among concurrent test processes."""
    global _count
    _count += 1
    n = os.getpid() * 7 + _count
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    for _ in range(4):
        out, n = digits[n % 36] + out, n // 36
    return "t" + out


def up(n: int, gbit: float = 1.0, *, slots: int = 1) -> Cluster:
    if not SCRIPT.exists():
        pytest.fail(f"{SCRIPT} is missing", pytrace=False)
    subprocess.run(["bash", str(SCRIPT), "gc"], capture_output=True, timeout=60)
    name = _unique_name()
    proc = subprocess.run(["bash", str(SCRIPT), "up", str(n), "--gbit", str(gbit), "--name",
                           name, "--slots", str(slots), "--owner", str(os.getpid())],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode:
        pytest.fail("cannot bring up a cluster of network namespaces — the multi-host tests "
                    f"need root with CAP_NET_ADMIN/CAP_SYS_ADMIN: {proc.stderr.strip()}",
                    pytrace=False)
    hostfile = re.search(r"hostfile: (\S+)", proc.stdout).group(1)
    return Cluster(name, [f"{name}-h{i}" for i in range(1, n + 1)], hostfile, gbit)


def down(cluster: Cluster) -> None:
    subprocess.run(["bash", str(SCRIPT), "down", "--name", cluster.name], capture_output=True,
                   timeout=60)


def nntile_lab(*args, cwd, timeout=300, env=None) -> subprocess.CompletedProcess:
    """``nntile-lab ARGS`` from a fresh interpreter (the test's own environment, PYTHONPATH
    at the checkout); ``timeout`` ends it and its ranks."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "STARPU_SILENT": "1", **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "nntile_lab.cli", *map(str, args)],
                            cwd=cwd, env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"nntile-lab {' '.join(map(str, args))} did not end in {timeout} s:\n"
                    f"{err[-3000:]}", pytrace=False)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def wait_for(predicate, timeout: float, what: str, step: float = 0.2):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    pytest.fail(f"waited {timeout:.0f} s for {what}", pytrace=False)
