"""``nntile-lab bench schedulers`` at a tiny size, its grid, and ``trace.idle`` on
hand-made task timelines whose split is known exactly."""
import json
import re
import types

import numpy as np
import pandas as pd
import pytest

from nntile_lab import memory
from nntile_lab.bench import schedulers
from nntile_lab.cli import main
from nntile_lab.spec import ExperimentSpec
from nntile_lab.trace import idle

TINY = ["--n-layer", "2", "--n-embd", "128", "--n-head", "2", "--vocab-size", "8192",
        "--seq-len", "64", "--batch", "8", "--vocab-tile", "1024", "--inner-tile", "256",
        "--measure-steps", "2"]
TINY_SPEC = ExperimentSpec(n_layer=2, n_embd=128, n_head=2, vocab_size=8192, seq_len=64,
                           batch=8, vocab_tile=1024, inner_tile=256, measure_steps=2)


def test_points_cover_every_cell(tmp_path):
    pts = schedulers.points(TINY_SPEC, ("lws", "heteroprio"), repeats=2, ooc_fraction=0.5,
                            ooc_dir=str(tmp_path))
    cells = {(p.memory_limit_mb is None, p.scheduler, p.priorities) for p in pts}
    # heteroprio takes priorities too (its buckets: kernels/runtime/heteroprio.c)
    assert cells == {(m, s, p) for m in (True, False) for s in ("lws", "heteroprio")
                     for p in (True, False)}
    assert len(pts) == 2 * 4 * 2 and {p.seed for p in pts} == {0, 1}
    ooc = [p for p in pts if p.memory_limit_mb is not None]
    peak = memory.estimate(TINY_SPEC).peak_bytes / 2**20
    assert all(p.memory_limit_mb < peak and p.ooc_dir == str(tmp_path) for p in ooc)
    assert all(memory.estimate(p).verdict == "fits_with_disk" for p in ooc)


def test_bad_settings_say_what_to_change(tmp_path):
    with pytest.raises(ValueError, match="ooc_fraction=1.5 must be between 0 and 1"):
        schedulers.out_of_core(TINY_SPEC, 1.5, str(tmp_path))
    with pytest.raises(ValueError, match="not below the step's peak"):
        schedulers.out_of_core(ExperimentSpec(n_layer=1, n_embd=16, n_head=1, vocab_size=64,
                                              seq_len=8, batch=2), 0.5, str(tmp_path))
    with pytest.raises(ValueError, match="repeats=0"):
        schedulers.points(TINY_SPEC, repeats=0)


def test_cli_writes_table_figure_and_record(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["bench", "schedulers", *TINY, "--schedulers", "eager,lws,heteroprio",
               "--repeats", "1", "--ooc-dir", str(tmp_path / "ooc"), "--cache",
               str(tmp_path / "cache"), "--in-process", "--no-progress", "--out", str(out),
               "--json"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    rows = pd.DataFrame(res["summary"])
    assert len(rows) == 2 * 6          # 2 modes × (eager, lws, heteroprio) × on/off
    assert rows["error"].isna().all(), rows["error"].tolist()
    assert set(rows[rows["scheduler"] == "heteroprio"]["priorities"]) == {False, True}
    assert "opencl_task_share" not in rows     # CPU workers only: no placement columns
    caps = set(rows["mode"]) - {"in memory"}     # the cap: a share of the planned peak
    assert len(caps) == 1 and re.fullmatch(r"out of core \(\d+ MiB cap\)", caps.pop())
    assert (rows["step_ms"] > 0).all() and (rows["step_min_ms"] <= rows["step_ms"]).all()
    for share in ("idle_share", "overhead_share", "both_idle_submission_share"):
        assert rows[share].between(0, 1).all(), share
    assert (out / "schedulers.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "schedulers.md").read_text()
    assert md.count("\n") == 2 + len(rows)
    assert re.search(r"\| out of core \(\d+ MiB cap\) \| lws \| on \|", md)
    rec = json.loads((out / "schedulers.json").read_text())
    assert rec["kind"] == "bench-schedulers" and len(rec["results"]["points"]) == 12


def _trace(tasks, steps, workers=(0, 1)):
    t = pd.DataFrame(tasks, columns=["worker", "submit_us", "ready_us", "start_us", "end_us",
                                     "name"])
    return types.SimpleNamespace(tasks=t, steps=pd.DataFrame(steps, columns=["step", "start_us",
                                                                             "end_us"]),
                                 workers=pd.DataFrame({"worker": list(workers)}))


def test_idle_split_of_a_known_timeline():
    # one step [0, 100]; worker 0: a, ready at 5, runs 10–25; b, ready at 45, runs 50–90.
    # worker 1: c runs 0–20; d, ready at 15 (before c ended), runs 30–60.
    tr = _trace([(0, 0, 5, 10, 25, "a"), (0, 0, 45, 50, 90, "b"),
                 (1, 0, 0, 0, 20, "c"), (1, 0, 15, 30, 60, "d")], [(0, 0, 100)])
    s = idle.worker_split(tr)
    assert s["kernel_us"] == 15 + 40 + 20 + 30
    # overhead: a 10−max(0,5)=5; b 50−45=5; c 0; d 30−20=10
    assert s["overhead_us"] == 20
    # waiting: a 5 (0→5); b 20 (25→45); tails: worker 0 10, worker 1 40
    assert s["waiting_us"] == 5 + 20 + 10 + 40
    assert s["window_us"] == 200 == s["kernel_us"] + s["overhead_us"] + s["waiting_us"]
    gaps = idle.both_idle(tr)
    # both idle: 25–30 (d submitted at 0: runtime) and 90–100 (the step's end)
    assert gaps[["start_us", "end_us", "cause"]].values.tolist() == [
        [25.0, 30.0, "runtime"], [90.0, 100.0, "submission"]]
    b = idle.breakdown(tr)
    assert b["both_idle_share"] == pytest.approx(0.15)
    assert b["both_idle_submission_share"] == pytest.approx(0.1)
    assert b["overhead_share"] == pytest.approx(0.1)


def test_both_idle_waiting_for_python_is_submission():
    # worker 0 ends at 30, the next task is submitted at 50 (Python was busy): 30–55 is
    # Python's gap; a second step is its own window
    tr = _trace([(0, 0, 0, 0, 30, "a"), (1, 50, 52, 55, 80, "b"), (0, 100, 100, 101, 150, "c")],
                [(0, 0, 80), (1, 80, 150)])
    gaps = idle.both_idle(tr)
    assert gaps[["step", "start_us", "end_us", "cause", "next_task"]].values.tolist() == [
        [0, 30.0, 55.0, "submission", "b"], [1, 80.0, 101.0, "submission", "c"]]


def test_unlike_workers_calibrate_then_say_where_tasks_ran(tmp_path):
    """On 1 CPU + 1 OpenCL worker: the models are calibrated for both archs first, and
    each cell says how much ran on the device and on the arch the models call faster."""
    from nntile_lab._lib import lib
    from nntile_lab.runtime import opencl_devices
    if not lib.nl_opencl_built() or opencl_devices() < 1:
        pytest.fail("no OpenCL device: run scripts/setup.sh and check `clinfo -l`",
                    pytrace=False)
    base = ExperimentSpec(n_layer=1, n_embd=64, n_head=2, vocab_size=1024, seq_len=32,
                          batch=4, vocab_tile=512, inner_tile=128, warmup_steps=1,
                          measure_steps=1, ncpu=1, nopencl=1)
    assert schedulers.default_schedulers(base) == schedulers.UNLIKE_SCHEDULERS
    summary, df = schedulers.run(base, ("dmda", "heteroprio"), repeats=1, ooc_fraction=None,
                                 cache_dir=tmp_path / "cache", isolate=False, progress=False,
                                 calibrate_steps=2)
    assert summary["error"].isna().all(), summary["error"].tolist()
    assert len(summary) == 4
    for m in schedulers.PLACEMENT:
        assert summary[m].between(0, 1).all(), (m, summary[m].tolist())
    ent = df.attrs["perfmodels"]
    assert {"cpu", "opencl"} <= set(ent[ent["op"] == "gemm"]["arch"])
    from nntile_lab._lib import ffi
    has_opencl = {ffi.string(lib.nl_op_name(i)).decode(): lib.nl_op_has_opencl(i)
                  for i in range(lib.nl_op_count())}
    for op, g in ent.groupby("op"):     # an op without an OpenCL kernel ran on CPUs only
        assert has_opencl[op] or set(g["arch"]) == {"cpu"}, op
    paths = schedulers.write(summary, df, tmp_path / "out", base)
    md = paths["md"].read_text()
    assert "tasks on OpenCL" in md and "| gemm |" in md
    assert pd.read_csv(paths["perfmodels"]).shape[0] == len(ent)


@pytest.mark.parametrize("command", ["schedulers", "depth"])
@pytest.mark.parametrize("extra", [["--ooc-fraction", "0.3"], ["--ooc-dir", "/tmp"]])
def test_no_ooc_with_an_out_of_core_option_is_refused(capsys, command, extra):
    """--no-ooc beside --ooc-fraction: one of them was silently ignored."""
    assert main(["bench", command, "--no-ooc", *extra]) == 2
    err = capsys.readouterr().err
    assert err == (f"nntile-lab bench {command}: error: {extra[0]} sets the out-of-core runs "
                   "that --no-ooc leaves out: give one of them\n")


@pytest.mark.parametrize("command", ["schedulers", "depth"])
def test_on_opencl_workers_the_comparison_runs_in_memory_and_says_so(monkeypatch, capsys,
                                                                    command):
    """`bench schedulers --nopencl 1` (the documented command) failed in every
    out-of-core point after the calibration: a disk node under an OpenCL device is refused.
    Now in memory only, said once; an out-of-core option beside --nopencl is a usage error,
    and the library refuses such points before any runs."""
    from nntile_lab.bench import depth
    got = {}
    module = schedulers if command == "schedulers" else depth

    def fake_run(base, names, repeats, ooc_fraction, *a, **k):
        got["ooc_fraction"] = ooc_fraction
        raise KeyboardInterrupt   # (nothing to measure: stop here)
    monkeypatch.setattr(module, "run", fake_run)
    assert main(["bench", command, "--nopencl", "1", "--ncpu", "1"]) == 130
    assert got["ooc_fraction"] is None
    assert "in memory only with --nopencl 1" in capsys.readouterr().err
    assert main(["bench", command, "--nopencl", "1", "--ooc-fraction", "0.5"]) == 2
    assert ("--ooc-fraction with --nopencl 1: a disk node under an OpenCL device's memory "
            "livelocks StarPU 1.3") in capsys.readouterr().err
    base = ExperimentSpec(n_layer=4, nopencl=1)
    with pytest.raises(ValueError, match=r"ooc_fraction=0.5 with nopencl=1: .*give "
                                         r"ooc_fraction=None \(--no-ooc\)"):
        module.points(base, ooc_fraction=0.5)
    assert module.points(base, repeats=1, ooc_fraction=None)


def test_one_scheduler_given_as_a_string_is_one_policy_not_its_letters():
    """points(base, "eager") swept 'e', 'a', 'g', … ("unknown scheduler 'e'" five times)."""
    pts = schedulers.points(TINY_SPEC, "eager", repeats=1, ooc_fraction=None)
    assert {p.scheduler for p in pts} == {"eager"} and len(pts) == 2   # priorities off, on
    with pytest.raises(TypeError, match=r"schedulers=\[1, 2\]: give policy names"):
        schedulers.points(TINY_SPEC, [1, 2], repeats=1, ooc_fraction=None)


def test_placement_panel_labels_every_series_and_centres_its_ticks():
    """Issue 33 (notebook 10): the placement panel had scheduler names off their bars, an
    unlabelled dash series and diamonds (a share of tasks on the faster kind) under an axis
    reading "share on OpenCL"."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from nntile_lab.plots.schedulers import figure, placement_figure
    rng = np.random.default_rng(7)
    names = ["dmda", "dmdas", "heteroprio", "eager", "lws", "ws"]
    rows = [{"mode": "in memory", "scheduler": n, "priorities": p, "error": None,
             "step_ms": 100.0, "step_min_ms": 90.0, "step_max_ms": 110.0, "idle_share": 0.2,
             "opencl_task_share": rng.uniform(), "opencl_time_share": rng.uniform(),
             "on_faster": rng.uniform()} for n in names for p in (False, True)]
    summary = pd.DataFrame(rows)
    for fig in (placement_figure(summary), figure(summary)):
        ax = fig.axes[-1]
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert labels == ["kernel time on OpenCL",
                          "tasks on the faster kind (models; ops both kinds run)",
                          "tasks on OpenCL, priorities off", "tasks on OpenCL, priorities on"]
        assert all(not line.get_label().startswith("_") for line in ax.get_lines())
        assert "OpenCL" not in ax.get_ylabel()      # the diamonds are not a share on OpenCL
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer = canvas.get_renderer()
        for k, tick in enumerate(ax.get_xticklabels()):
            assert tick.get_text() == names[k] and tick.get_rotation_mode() == "anchor"
            # a slanted name ends at its tick, the middle of its pair of bars
            x_tick = ax.transData.transform((k, 0))[0]
            box = tick.get_window_extent(renderer)
            assert box.x0 < x_tick <= box.x1 + 2, (names[k], box, x_tick)
            assert abs(box.x1 - x_tick) < 0.25 * abs(ax.transData.transform((1, 0))[0]
                                                        - ax.transData.transform((0, 0))[0])
        legend = ax.get_legend().get_window_extent(renderer)
        assert legend.y1 <= ax.get_window_extent(renderer).y0   # below the axes, not on bars
