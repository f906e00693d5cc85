"""The paper's figures: the family, the paper's points, drawing from records alone (synthetic,
fast), the memory cap, and one tiny real point of each system."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from dataclasses import replace

import pytest

from nntile_lab.figures import SMOKE, FigurePlan, family_params, redraw
from nntile_lab.figures.family import model_config, point_spec
from nntile_lab.figures.paper import reference_points
from nntile_lab.figures.records import read_records, write_point_record
from nntile_lab.figures.run import point_list, run_point
from nntile_lab.spec import ExperimentSpec
from tests.jupyter_kernel import REPO

PLAN = FigurePlan(layers=(4, 8), embds=(64, 128), batch=2, seq_len=16, cap_mb=100,
                  bf16=True, measure_steps=1, point_timeout_s=120)


def test_family_params_is_the_papers_count():
    assert family_params(4, 5120) == 12 * 4 * 5120**2 + 50257 * 5120
    assert round(family_params(4, 5120) / 1e9, 1) == 1.5    # the paper's first 4-layer model
    assert round(family_params(4, 23552) / 1e9, 1) == 27.8  # where NNTile ran out of memory
    assert round(family_params(8, 5120) / 1e9, 1) == 2.8
    for n_layer, e in ((4, 64), (8, 192)):
        cfg = model_config(n_layer, e, SMOKE)
        # the family leaves out biases and norms (13·E a block, 2·E the final norm)
        assert cfg.num_params() == family_params(n_layer, e) + n_layer * 13 * e + 2 * e
        assert cfg.n_inner == 4 * e and cfg.n_head == e // 64


def test_reference_points_are_the_papers():
    ref = reference_points().set_index(["setup", "series", "n_embd"]).tflops
    assert ref["4L_4xA100", "NNTile tf32", 5120] == 327
    assert ref["4L_4xA100", "NNTile tf32", 23552] == 0        # fails at 27.8B
    assert ref["4L_4xA100", "PyTorch FSDP tf32", 12288] == 0  # fails at 7.9B
    assert ref["8L_8xA100", "PyTorch FSDP bf16", 14336] == 587
    assert ref["4L_8xA100", "NNTile tf32", 31744] == 349     # 50.0B


def test_bad_plans_name_the_field():
    with pytest.raises(ValueError, match="n_embd=100"):
        FigurePlan(embds=(100,))
    with pytest.raises(ValueError, match="cap_mb=0"):
        FigurePlan(cap_mb=0)
    with pytest.raises(ValueError, match="systems"):
        FigurePlan(systems=("jax",))


def _synthetic(tmp_path):
    """Records for every point of PLAN: 4-layer nntile 100/120, torch 80/0 (did not fit)…"""
    gf = {}
    for i, (system, n_layer, e) in enumerate(point_list(PLAN)):
        fits = e == 64 or system == "nntile_lab"
        ooc = system == "nntile_lab" and e == 128  # beyond the cap, out of core
        g = float(10 * (i + 1)) if fits else 0.0
        gf[system, n_layer, e] = g
        mem = {"parameters": 1 << 20, "gradients": 1 << 20, "optimizer state": 2 << 20,
               "activations": 3 << 20}
        write_point_record(tmp_path, PLAN, {
            "system": system, "n_layer": n_layer, "n_embd": e, "gflops": g,
            "status": "ok" if fits else "out_of_memory", "error": None if fits else "over",
            "step_time_s": 0.5, "step_time_spread_s": 0.01, "tokens_per_s": 64.0,
            "peak_mb": 7.0, "memory": mem if fits else None, "out_of_core": ooc})
    return gf


def _table(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_redraw_from_records_alone_without_starpu(tmp_path):
    gf = _synthetic(tmp_path)
    # the compiled extension made unimportable: the records and matplotlib must suffice
    code = ("import sys; sys.modules['nntile_lab._ext'] = None\n"
            "from nntile_lab.figures import redraw\n"
            f"redraw({str(tmp_path)!r})\n"
            "assert 'nntile_lab._ext' not in sys.modules or sys.modules['nntile_lab._ext'] "
            "is None\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=120)
    for name in ("throughput_L4", "throughput_L8", "memory_L4", "paper_reference"):
        for ext in ("png", "pdf", "csv"):
            assert (tmp_path / f"{name}.{ext}").stat().st_size > 0, f"{name}.{ext}"
    rows = _table(tmp_path / "throughput_L8.csv")
    assert [r["model size"] for r in rows] == ["3.6M", "8.0M"]  # size order, family's count
    assert float(rows[0]["nntile_lab"]) == gf["nntile_lab", 8, 64]
    assert float(rows[1]["torch_fp32"]) == 0.0  # did not fit: 0, as in the paper
    assert float(rows[1]["torch_bf16"]) == 0.0
    mem = _table(tmp_path / "memory_L4.csv")
    ok = [r for r in mem if r["status"] == "ok"]
    in_ram = [r for r in ok if r["system"] == "nntile_lab" and r["params"] == str(
        family_params(4, 128))]
    # an out-of-core point's bar is what it held in RAM, not its (partly on disk) tensors
    assert len(in_ram) == 1 and float(in_ram[0]["in RAM, rest on disk"]) == 7.0
    assert float(in_ram[0]["parameters"]) == 0.0
    ok = [r for r in ok if r not in in_ram]
    assert all(float(r["activations"]) == 3.0 for r in ok)
    assert all(float(r["parameters"]) == 0.0 for r in mem if r["status"] != "ok")
    summary = (tmp_path / "summary.md").read_text()
    ratio = gf["nntile_lab", 4, 64] / gf["torch_fp32", 4, 64]
    assert f"| 4 | 3.4M | {gf['nntile_lab', 4, 64]:.1f} |" in summary
    assert f"| {ratio:.2f} |" in summary
    assert "paper 4L_4xA100 | 0.91 |" in summary  # 327 / 360


def test_cli_redraws_and_bad_records_are_named(tmp_path):
    _synthetic(tmp_path)
    cli = [sys.executable, "-m", "nntile_lab.cli", "figures", "--from", str(tmp_path)]
    out = subprocess.run(cli, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "redrew 16 points" in out.stdout
    out = subprocess.run(cli + ["--json"], capture_output=True, text=True, cwd=REPO,
                         timeout=120)
    (line,) = out.stdout.splitlines()            # one JSON document
    res = json.loads(line)
    assert out.returncode == 0 and res["points"] == 16 == len(res["rows"])
    assert res["out"] == str(tmp_path) and any(f.endswith(".png") for f in res["files"])
    bad = tmp_path / "records" / "torch_fp32_L4_E64.json"
    bad.write_text("{not json")
    out = subprocess.run(cli, capture_output=True, text=True, cwd=REPO, timeout=120)
    # a bad file read is the work failing (exit 1), not a bad command line (2)
    assert out.returncode == 1 and "torch_fp32_L4_E64.json" in out.stderr
    assert "Traceback" not in out.stderr
    bad.write_text(json.dumps({"kind": "figure_point", "record_version": 0}))
    with pytest.raises(ValueError, match="torch_fp32_L4_E64.json has format 0.*does not read"):
        read_records(tmp_path)
    empty = tmp_path / "nothing"
    with pytest.raises(FileNotFoundError, match="no figure records"):
        read_records(empty)


def test_a_point_that_cannot_fit_is_zero_without_running():
    res = run_point(replace(PLAN, cap_mb=1), "torch_fp32", 4, 128)
    assert res["status"] == "does_not_fit" and res["gflops"] == 0.0
    assert "1 MiB cap" in res["error"]
    assert res["spec"] == point_spec(4, 128, PLAN).to_dict()     # what would have run


def test_nntile_beyond_the_cap_runs_out_of_core_under_it():
    # 4 layers, E=192, vocab 50257: 11.4M parameters = 175 MiB of fp32 Adam state, cap 160 MiB
    plan = replace(PLAN, cap_mb=160, point_timeout_s=300)
    res = run_point(plan, "nntile_lab", 4, 192)
    assert res["out_of_core"] and res["status"] == "ok", res.get("error")
    assert res["gflops"] > 0 and res["peak_mb"] <= 160
    spec = res["spec"]          # the ExperimentSpec it ran: StarPU's share of the cap, a disk
    assert spec["memory_limit_mb"] == int(160 * 0.6) and spec["ooc_dir"]
    assert ExperimentSpec.from_dict(spec | {"ooc_dir": "/tmp"}).n_embd == 192
    assert run_point(replace(plan, ooc=False), "nntile_lab", 4, 192)["status"] == "does_not_fit"


@pytest.mark.slow
@pytest.mark.parametrize("system", ["nntile_lab", "torch_fp32", "nntile_lab_bf16"])
def test_one_tiny_real_point(system):
    from nntile_lab.figures.family import PRECISION, series_spec
    plan = replace(PLAN, cap_mb=2048)
    res = run_point(plan, system, 4, 64)
    assert res["status"] == "ok", res.get("error")
    assert res["precision"] == PRECISION[system]
    cfg = model_config(4, 64, plan)
    spec = series_spec(system, 4, 64, plan)     # both systems run the same ExperimentSpec
    assert res["spec"] == spec.to_dict() and spec.gpt2_config() == cfg
    assert spec.precision == PRECISION[system]
    assert (spec.batch, spec.seq_len, spec.measure_steps) == (plan.batch, plan.seq_len,
                                                              plan.measure_steps)
    assert res["gflops"] > 0.1
    assert res["flops_per_step"] == cfg.flops_per_token(16) * 2 * 16
    assert res["gflops"] == pytest.approx(res["flops_per_step"] / res["step_time_s"] / 1e9)
    mem = res["memory"]
    # fp32: weights (positions included) 4 B each, gradients the same, Adam 2 moments
    n = cfg.num_params(with_positions=True)
    # bf16: the GEMM weights' bf16 copies (2 B each: every weight matrix but the positions)
    copies = 2 * (4 * 12 * 64 * 64 + plan.vocab_size * 64) if system.endswith("bf16") else 0
    assert mem["parameters"] == 4 * n + copies and mem["gradients"] == 4 * n
    assert mem["optimizer state"] == 8 * n
    assert res["peak_mb"] * 2**20 >= mem["parameters"]


def test_nntile_over_the_cap_in_memory_retries_out_of_core(monkeypatch):
    from nntile_lab.figures import run as run_mod
    calls = []

    def fake(plan, system, n_layer, n_embd, base, *, out_of_core, compiled=False):
        calls.append((system, out_of_core) + (("compiled",) if compiled else ()))
        return base | {"status": "ok" if out_of_core else "out_of_memory",
                       "out_of_core": out_of_core}

    monkeypatch.setattr(run_mod, "_run_process", fake)
    plan = replace(PLAN, cap_mb=2048)  # fits by the estimate: runs in memory first
    assert run_point(plan, "nntile_lab", 4, 64)["status"] == "ok"
    assert calls == [("nntile_lab", False), ("nntile_lab", True)]
    calls.clear()
    # no disk for PyTorch: eager and compiled both over, the point is eager's failure
    res = run_point(plan, "torch_fp32", 4, 64)
    assert (res["status"], res["torch_mode"]) == ("out_of_memory", "eager")
    assert calls == [("torch_fp32", False), ("torch_fp32", False, "compiled")]
    calls.clear()
    assert run_point(replace(plan, ooc=False), "nntile_lab", 4, 64)["status"] == "out_of_memory"
    assert calls == [("nntile_lab", False)]


def test_the_device_series_is_measured_only_when_asked():
    assert "nntile_lab_device" not in {s for s, _, _ in point_list(PLAN)}
    device = {(L, e) for s, L, e in point_list(replace(PLAN, device=True))
              if s == "nntile_lab_device"}
    assert device == {(L, e) for L in PLAN.layers for e in PLAN.embds}


def test_one_tiny_real_point_on_a_capped_device():
    """4 layers, E=128, vocab 4096: 1.3M parameters, 21 MiB of fp32 Adam state alone on a
    device capped at 16 MiB ("the GPU"): it trains with RAM as the overflow, never a 0;
    vocabulary tiles twice as wide would not fit there, and that point is a 0 unrun."""
    plan = replace(PLAN, cap_mb=16, device=True, vocab_size=4096, point_timeout_s=300)
    res = run_point(plan, "nntile_lab_device", 4, 128)
    assert res["status"] == "ok", res.get("error")
    assert res["spec"]["nopencl"] == 1 and res["spec"]["opencl_memory_limit_mb"] == 16
    assert res["gflops"] > 0 and res["peak_mb"] * 2**20 >= 16 * 1_300_000
    moved = {(b["src"], b["dst"]): b["bytes_per_step"] for b in res["buses"]}
    # every op runs on the device: uncapped, only the batch would cross each step; capped,
    # the state (21 MiB) cannot stay there and megabytes go back and forth
    assert moved[("NUMA 0", "OpenCL 0")] > 4 * 2**20 and moved[("OpenCL 0", "NUMA 0")] > 0
    wide = run_point(replace(plan, vocab_size=8192), "nntile_lab_device", 4, 128)
    assert wide["status"] == "does_not_fit" and wide["gflops"] == 0.0
    assert "--opencl-memory-limit-mb 16 is below 2 × the largest task" in wide["error"]


def test_redraw_draws_the_device_series_and_its_transfers(tmp_path):
    plan = replace(PLAN, device=True)
    for system, n_layer, e in point_list(plan):
        extra = ({"buses": [{"src": "NUMA 0", "dst": "OpenCL 0", "bytes": 0, "transfers": 9,
                             "bytes_per_step": e * 2**20, "transfers_per_step": 9},
                            {"src": "OpenCL 0", "dst": "NUMA 0", "bytes": 0, "transfers": 3,
                             "bytes_per_step": e * 2**19, "transfers_per_step": 3}]}
                 if system == "nntile_lab_device" else {})
        write_point_record(tmp_path, plan, {
            "system": system, "n_layer": n_layer, "n_embd": e, "gflops": 5.0, "status": "ok",
            "error": None, "step_time_s": 0.5, "step_time_spread_s": 0.01,
            "tokens_per_s": 64.0, "peak_mb": 7.0, "memory": None, "out_of_core": False}
            | extra)
    from nntile_lab.figures import redraw
    df = redraw(tmp_path)
    assert set(df.system) >= {"nntile_lab", "nntile_lab_device"}
    for n_layer in PLAN.layers:
        rows = _table(tmp_path / f"device_transfers_L{n_layer}.csv")
        assert [float(r["RAM → device"]) for r in rows] == [64.0, 128.0]
        assert [float(r["device → RAM"]) for r in rows] == [32.0, 64.0]
        assert (tmp_path / f"device_transfers_L{n_layer}.png").stat().st_size > 1000
    tput = _table(tmp_path / "throughput_L4.csv")
    assert all(float(r["nntile_lab_device"]) == 5.0 for r in tput)


def test_bf16_series_of_both_systems_are_drawn_and_ratioed(tmp_path):
    gf = _synthetic(tmp_path)
    assert {s for s, _, _ in point_list(PLAN)} == {"nntile_lab", "torch_fp32",
                                                   "nntile_lab_bf16", "torch_bf16"}
    df = redraw(tmp_path)
    # records keyed by precision: each series' own
    prec = df.groupby("system").precision.unique().to_dict()
    assert {k: list(v) for k, v in prec.items()} == {
        "nntile_lab": ["fp32"], "torch_fp32": ["fp32"], "nntile_lab_bf16": ["bf16"],
        "torch_bf16": ["bf16"]}
    rows = _table(tmp_path / "throughput_L4.csv")
    assert float(rows[0]["nntile_lab_bf16"]) == gf["nntile_lab_bf16", 4, 64]
    mem = _table(tmp_path / "memory_L4.csv")
    assert {r["system"] for r in mem} == set(prec)
    summary = (tmp_path / "summary.md").read_text()
    assert "nntile_lab bf16 / PyTorch bf16" in summary and "nntile_lab bf16 / fp32" in summary
    bf = gf["nntile_lab_bf16", 4, 64] / gf["torch_bf16", 4, 64]
    own = gf["nntile_lab_bf16", 4, 64] / gf["nntile_lab", 4, 64]
    line = next(x for x in summary.splitlines() if x.startswith("| 4 | 3.4M |"))
    assert line.endswith(f"| {bf:.2f} | {own:.2f} |"), line


def test_records_from_before_the_bf16_series_still_draw(tmp_path):
    """Records measured before the bf16 series (no precision field, three systems, a plan
    without nntile_lab_bf16) are fp32 but for torch_bf16's, and redraw as they did."""
    old = replace(PLAN, systems=("nntile_lab", "torch_fp32", "torch_bf16"))
    for system in old.systems:
        write_point_record(tmp_path, old, {
            "system": system, "n_layer": 4, "n_embd": 64, "gflops": 5.0, "status": "ok",
            "error": None, "step_time_s": 0.5, "tokens_per_s": 64.0, "peak_mb": 7.0,
            "memory": {"parameters": 1 << 20}, "out_of_core": False})
    df = redraw(tmp_path)
    assert dict(zip(df.system, df.precision)) == {"nntile_lab": "fp32", "torch_fp32": "fp32",
                                                  "torch_bf16": "bf16"}
    assert "nntile_lab_bf16" not in _table(tmp_path / "throughput_L4.csv")[0]


def test_precision_selects_the_series(monkeypatch, tmp_path):
    from nntile_lab.figures import cli as fcli
    from nntile_lab.figures import family
    plans = []
    monkeypatch.setattr(fcli, "run_figures", lambda plan, out, resume: plans.append(plan) or
                        __import__("pandas").DataFrame({"status": []}))
    monkeypatch.setattr(fcli, "cpu_has_bf16", lambda: True)
    base = ["figures", "--smoke", "--out", str(tmp_path)]
    from nntile_lab import cli
    assert cli.main(base + ["--precision", "bf16"]) == 0
    assert plans[-1].systems == ("nntile_lab_bf16", "torch_bf16") and plans[-1].bf16
    assert cli.main(base + ["--precision", "fp32"]) == 0
    assert plans[-1].systems == ("nntile_lab", "torch_fp32") and plans[-1].bf16 is False
    assert cli.main(base + ["--precision", "fp32,bf16"]) == 0
    assert plans[-1].systems == family.systems_for(family.PRECISIONS)
    assert cli.main(base + ["--precision", "fp16"]) == 2
    assert cli.main(base + ["--precision", "bf16", "--no-bf16"]) == 2
    monkeypatch.setattr(fcli, "cpu_has_bf16", lambda: False)
    assert cli.main(base + ["--precision", "bf16"]) == 2
    assert len(plans) == 3


def test_bf16_point_runs_in_bf16_and_says_so():
    """A bf16 series' point runs the same model with precision bf16 (the spec it records);
    fp32 series' specs are the spec's default, as before."""
    from nntile_lab.figures.family import series_spec
    assert series_spec("nntile_lab", 4, 64, PLAN) == point_spec(4, 64, PLAN)
    assert series_spec("torch_bf16", 4, 64, PLAN).precision == "bf16"
    res = run_point(replace(PLAN, cap_mb=1, ooc=False), "nntile_lab_bf16", 4, 128)
    assert res["status"] == "does_not_fit"
    assert res["precision"] == "bf16" and res["spec"]["precision"] == "bf16"


@pytest.mark.parametrize("eager, compiled, mode", [
    (("ok", 100.0), ("ok", 150.0), "compiled"), (("ok", 100.0), ("ok", 90.0), "eager"),
    (("ok", 100.0), ("out_of_memory", 0.0), "eager"),
    (("out_of_memory", 0.0), ("ok", 80.0), "compiled")])
def test_pytorch_points_are_the_faster_mode_that_fits(monkeypatch, eager, compiled, mode):
    """The strongest PyTorch: eager and torch.compile each under the cap, the faster that
    fitted drawn, both outcomes kept in the record."""
    from nntile_lab.figures import run as run_mod
    got = {False: eager, True: compiled}

    def fake(plan, system, n_layer, n_embd, base, *, out_of_core, compiled=False):
        status, gflops = got[compiled]
        return base | {"status": status, "gflops": gflops,
                       "torch_mode": "compiled" if compiled else "eager"}

    monkeypatch.setattr(run_mod, "_run_process", fake)
    res = run_point(replace(PLAN, cap_mb=2048), "torch_bf16", 4, 64)
    assert res["torch_mode"] == mode and res["status"] == "ok"
    assert res["gflops"] == got[mode == "compiled"][1]
    assert {m: r["gflops"] for m, r in res["modes"].items()} == {"eager": eager[1],
                                                                  "compiled": compiled[1]}
    monkeypatch.setattr(run_mod, "_run_process", lambda *a, compiled=False, **k: pytest.fail(
        "compiled asked") if compiled else fake(*a, compiled=False, **k))
    res = run_point(replace(PLAN, cap_mb=2048, torch_compile=False), "torch_bf16", 4, 64)
    assert res["torch_mode"] == "eager" and set(res["modes"]) == {"eager"}


def test_the_summary_says_which_pytorch_mode_was_drawn():
    from nntile_lab.figures.summary import _torch_modes

    def rec(system, status="fits", **results):
        return {"results": {"system": system, **results}, "status": status, "ran": True,
                "reason": None if status == "fits" else "over"}
    recs = [rec("torch_fp32", torch_mode="compiled"), rec("torch_bf16", torch_mode="eager"),
            rec("torch_bf16", "oom", torch_mode="eager"), rec("nntile_lab")]
    assert _torch_modes(recs).endswith("compiled at 1 of the 2 PyTorch points that ran.")
    # records from before both modes were measured: eager, as they were
    assert _torch_modes([rec("torch_fp32")]) == "PyTorch: eager."


@pytest.mark.parametrize("extra", [["--layers", "4"], ["--smoke"], ["--fresh"], ["--device"],
                                   ["--cap-mb", "64"], ["--no-ooc"]])
def test_from_refuses_the_options_of_a_measuring_run(tmp_path, capsys, extra):
    """--from only redraws: a measuring option beside it was silently ignored."""
    from nntile_lab import cli
    _synthetic(tmp_path)
    assert cli.main(["figures", "--from", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"nntile-lab figures: error: {extra[0]} is for a measuring run: "
                          "--from only redraws recorded points") and err.count("\n") == 1
    assert not (tmp_path / "throughput_L4.png").exists()


def test_a_cap_too_small_for_the_out_of_core_points_names_cap_mb(tmp_path, capsys,
                                                                  monkeypatch):
    """--cap-mb 16 failed in every out-of-core point naming --memory-limit-mb, an option
    figures lacks; now one usage error before any point, naming --cap-mb and the fix."""
    from nntile_lab import cli
    from nntile_lab.figures import cli as figures_cli
    monkeypatch.setattr(figures_cli, "run_figures", lambda *a, **k: pytest.fail("ran"))
    assert cli.main(["figures", "--cap-mb", "16", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nntile-lab figures: error: --cap-mb 16: the out-of-core points "
                          "give StarPU 0.6 of the cap for tiles, 9 MiB, under the 16 MiB "
                          "StarPU needs: give --cap-mb 27 or more, or --no-ooc")
    assert "--memory-limit-mb" not in err
    # the smallest cap that leaves StarPU 16 MiB, or no out-of-core points, is accepted
    import pandas as pd
    ran = []
    monkeypatch.setattr(figures_cli, "run_figures", lambda plan, out, resume: ran.append(
        plan.cap_mb) or pd.DataFrame({"status": []}))
    for argv in (["--cap-mb", "27"], ["--cap-mb", "16", "--no-ooc"]):
        assert cli.main(["figures", *argv, "--out", str(tmp_path)]) == 0, capsys.readouterr()
    assert ran == [27, 16]


def test_the_notebook_default_is_the_quick_plan_and_the_full_one_a_switch_away():
    """Issue 33 item 5: 06 ran the full plan (48 points, 14+ minutes on 2 cores) by
    default. Its default is QUICK now — 16 points, no torch.compile, fp32 — and FULL one
    assignment away. (How long QUICK takes is measured, not asserted: docs/paper-figures.md.)"""
    import nbformat

    from nntile_lab.figures import FULL, QUICK
    from nntile_lab.figures.run import point_list
    from tests.jupyter_kernel import NOTEBOOKS
    quick = point_list(QUICK.with_bf16_resolved())
    assert len(quick) == 16 and not QUICK.torch_compile and QUICK.bf16 is False
    assert {s for s, _, _ in quick} == {"nntile_lab", "torch_fp32"}
    # PyTorch stops fitting inside the plan, so the figure shows the paper's point
    assert QUICK.cap_mb < 16 * family_params(4, max(QUICK.embds)) / 2**20
    assert 16 * family_params(4, min(QUICK.embds)) / 2**20 < QUICK.cap_mb / 2
    assert len(point_list(FULL.with_bf16_resolved())) > 2 * len(quick)
    code = "\n".join(c.source for c in nbformat.read(
        NOTEBOOKS / "06_paper_figures.ipynb", as_version=4).cells if c.cell_type == "code")
    assert "FULL_PLAN = False" in code and "FULL if FULL_PLAN else QUICK" in code
