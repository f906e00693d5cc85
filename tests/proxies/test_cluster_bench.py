"""scripts/cluster_bench.py end to end at a small size (minutes: ``pytest -m long``): the α-β
fit on 2 namespace hosts, the GPT-2 proxy and the StarPU-MPI step measured and predicted on 2
and 4 hosts, the records, the table and the figure. How close the predictions come is a
benchmark (BENCHMARKS.md), never a timed assertion here."""
import json
import subprocess
import sys

import pytest

from tests.netns_cluster import REPO


@pytest.mark.long
def test_the_check_runs_and_records_every_point(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "cluster_bench.py"),
                           "--hosts", "2,4", "--gbit", "0.5", "--steps", "3", "--max-bytes",
                           str(2**20), "--scale", "64", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stderr[-4000:]
    res = json.loads((tmp_path / "results.json").read_text())
    (setting,) = res["settings"]
    assert set(setting["fit"]) == {"p2p", "allreduce"}
    points = {(p["what"].split(" ")[0], p["hosts"]): p for p in setting["points"]}
    assert set(points) == {("GPT-2", 2), ("GPT-2", 4), ("StarPU-MPI", 2), ("StarPU-MPI", 4)}
    for p in points.values():
        assert p["measured_s"] > 0 and p["predicted_s"] > 0
    for n in (2, 4):
        assert points[("GPT-2", n)]["replay_hosts"] == n        # one rank on each host
        # the layout's bytes per rank do not depend on the transport (a few bytes of scalars
        # may land in the step before or after)
        assert points[("StarPU-MPI", n)]["volume_vs_local"] < 1e-5
    assert (tmp_path / "extrapolation.png").stat().st_size > 10_000
    assert "| 0.5 Gbit/s | StarPU-MPI step (data layout) | 4 |" in proc.stdout
