"""The figures of any model built from layers: the Llama family beside GPT-2's (same L, E,
cap; the Llama's own MLP width, parameter count, FLOPs and PyTorch twin), a model a user
registered (nn.config.register_model), and ``--model`` on the command line."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from nntile_lab.engine import RecordError
from nntile_lab.figures import FigurePlan, family_params, redraw
from nntile_lab.figures.family import (
    ADAM_BYTES_PER_PARAM,
    model_config,
    plan_params,
    point_spec,
    series_spec,
)
from nntile_lab.figures.records import does_not_fit, read_records, write_point_record
from nntile_lab.figures.run import _comparable, point_list, run_point
from nntile_lab.nn.config import GPT2Config, LlamaConfig, llama_inner_size

GPT2 = FigurePlan(layers=(4, 8), embds=(64, 128), batch=2, seq_len=16, cap_mb=100,
                  bf16=False, measure_steps=1, point_timeout_s=120, torch_compile=False)
LLAMA = replace(GPT2, model="llama")


@pytest.mark.parametrize("n_layer, n_embd", [(4, 64), (8, 256), (4, 384)])
def test_the_llama_family_is_the_llama_at_the_same_sizes(n_layer, n_embd):
    spec, gpt2 = point_spec(n_layer, n_embd, LLAMA), point_spec(n_layer, n_embd, GPT2)
    cfg = model_config(n_layer, n_embd, LLAMA)
    assert spec.model == "llama" and isinstance(cfg, LlamaConfig)
    assert isinstance(model_config(n_layer, n_embd, GPT2), GPT2Config)
    # the same L, E and heads of 64; the Llama's own SwiGLU width, not GPT-2's 4·E
    assert (cfg.n_layer, cfg.n_embd, cfg.n_head) == (n_layer, n_embd, n_embd // 64)
    assert cfg.n_inner == spec.n_inner == llama_inner_size(n_embd) and gpt2.n_inner == 4 * n_embd
    assert point_spec(8, 256, LLAMA).n_inner == 768     # 8/3·256 up to a multiple of 256
    # its size: every parameter of its tree (untied embedding and head), not 12·L·E² + V·E
    n = cfg.num_params(with_positions=True)
    assert plan_params(n_layer, n_embd, LLAMA) == n != family_params(n_layer, n_embd)
    assert plan_params(n_layer, n_embd, GPT2) == family_params(n_layer, n_embd)
    # the FLOPs a point divides by are the Llama's
    assert spec.flops_per_step() == cfg.flops_per_token(16) * 2 * 16
    assert spec.flops_per_step() != gpt2.flops_per_step()
    # every series runs it: the bf16 ones too
    assert series_spec("torch_bf16", n_layer, n_embd, LLAMA).model == "llama"


def test_the_same_cap_decides_by_the_llamas_own_size():
    """A cap between GPT-2's and the Llama's fp32 Adam state: GPT-2 fits, the Llama is a 0
    without running (and records the Llama's size)."""
    gpt2 = ADAM_BYTES_PER_PARAM * family_params(4, 128) / 2**20
    llama = ADAM_BYTES_PER_PARAM * plan_params(4, 128, LLAMA) / 2**20
    assert gpt2 < llama
    cap = int((gpt2 + llama) / 2)
    assert does_not_fit(replace(GPT2, cap_mb=cap), 4, 128) is None
    assert f"{llama:.0f} MiB" in does_not_fit(replace(LLAMA, cap_mb=cap), 4, 128)
    res = run_point(replace(LLAMA, cap_mb=cap, ooc=False), "torch_fp32", 4, 128)
    assert res["status"] == "does_not_fit" and res["spec"]["model"] == "llama"
    assert res["params"] == plan_params(4, 128, LLAMA)


def test_pytorch_series_trains_pytorchs_llama():
    """The PyTorch point of a Llama spec builds the PyTorch Llama (its parameter bytes are
    the Llama's, which nanoGPT's are not) and trains it."""
    pytest.importorskip("torch")   # a bench extra; CI installs it
    from nntile_lab.engine.memcap import MemoryCap
    from nntile_lab.figures.point import _torch
    spec = series_spec("torch_fp32", 4, 64, replace(LLAMA, measure_steps=1))
    times, static = _torch(spec.replace(warmup_steps=0), MemoryCap(None), "fp32")
    n = plan_params(4, 64, LLAMA)
    assert len(times) == 1 and times[0] > 0
    assert static["parameters"] == static["gradients"] == 4 * n
    assert static["optimizer state"] == 8 * n
    assert 4 * n != 4 * model_config(4, 64, GPT2).num_params(with_positions=True)


def test_a_model_a_user_registered_is_a_family_too(monkeypatch):
    """A registered model (tests/nn/variants: GPT-J's parallel block) makes the family;
    PyTorch has no twin of it, so only nntile_lab's series are allowed; its points' processes
    import the module that registers it."""
    from nntile_lab.figures import run as run_mod
    from tests.nn.variants import ParallelConfig
    with pytest.raises(ValueError, match="'test-parallel' has no PyTorch counterpart"):
        FigurePlan(model="test-parallel")
    with pytest.raises(ValueError, match="model='no-such' is unknown; choose from gpt2, llama"):
        FigurePlan(model="no-such")
    plan = replace(GPT2, model="test-parallel", systems=("nntile_lab",),
                   imports=("tests.nn.variants",))
    cfg = model_config(4, 64, plan)
    assert type(cfg) is ParallelConfig and cfg.n_inner == 4 * 64
    assert plan_params(4, 64, plan) == cfg.num_params(with_positions=True)
    assert [s for s, _, _ in point_list(plan)] == ["nntile_lab"] * 4
    points = []

    def fake(point):   # the point as the engine would run it
        points.append(point)
        return {"status": "fits", "reason": None, "ran": True, "versions": {},
                "cpu_variant": None, "results": {"gflops": 1.0}}
    monkeypatch.setattr(run_mod.engine, "run_point", fake)
    res = run_point(replace(plan, cap_mb=2048), "nntile_lab", 4, 64)
    assert res["status"] == "ok" and res["params"] == plan_params(4, 64, plan)
    (p,) = points
    assert p.spec.model == "test-parallel" and p.imports == ("tests.nn.variants",)


def _llama_records(tmp_path, plan=LLAMA):
    for system, n_layer, e in point_list(plan):
        write_point_record(tmp_path, plan, {
            "system": system, "n_layer": n_layer, "n_embd": e,
            "params": plan_params(n_layer, e, plan), "gflops": 10.0 + e,
            "status": "ok", "error": None, "step_time_s": 0.5, "step_time_spread_s": 0.0,
            "tokens_per_s": 64.0, "peak_mb": 7.0, "out_of_core": False,
            "memory": {"parameters": 1 << 20, "gradients": 1 << 20,
                       "optimizer state": 2 << 20, "activations": 3 << 20}})


def test_llama_records_redraw_as_the_llama_family(tmp_path):
    _llama_records(tmp_path)
    df = redraw(tmp_path)
    assert set(df.model) == {"llama"}
    assert sorted(df[df.n_layer == 4].params.unique()) == [plan_params(4, 64, LLAMA),
                                                          plan_params(4, 128, LLAMA)]
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("# The paper's figures at this machine's scale: the Llama")
    assert "Llama family" in summary and "PyTorch: the fast PyTorch Llama" in summary
    assert "12·L·E²" not in summary
    for name in ("throughput_L4", "throughput_L8", "memory_L4"):
        assert (tmp_path / f"{name}.png").stat().st_size > 0
    # a Llama record without its size cannot be drawn at the right place: named, not guessed
    path = tmp_path / "records" / "nntile_lab_L4_E64.json"
    rec = json.loads(path.read_text())
    del rec["results"]["params"]
    path.write_text(json.dumps(rec))
    with pytest.raises(RecordError, match=r"nntile_lab_L4_E64.json.*results.params=None"):
        read_records(tmp_path)


def test_one_folder_is_one_family(tmp_path):
    _llama_records(tmp_path)
    write_point_record(tmp_path, GPT2, {"system": "nntile_lab", "n_layer": 4, "n_embd": 192,
                                        "gflops": 0.0, "status": "does_not_fit",
                                        "error": "over", "out_of_core": False})
    with pytest.raises(ValueError, match="holds records of the models gpt2, llama"):
        redraw(tmp_path)


def test_plans_from_before_the_model_choice_are_gpt2s():
    """Records written before ``model`` existed resume and redraw as GPT-2's (not set
    aside as another run's), and a Llama plan is another run's."""
    old = {k: v for k, v in GPT2.to_dict().items() if k not in ("model", "imports")}
    assert _comparable(old) == _comparable(GPT2.to_dict())
    assert _comparable(LLAMA.to_dict()) != _comparable(GPT2.to_dict())


def test_cli_model_choice(monkeypatch, tmp_path, capsys):
    from nntile_lab import cli
    from nntile_lab.figures import cli as fcli
    plans, outs = [], []
    monkeypatch.setattr(fcli, "run_figures", lambda plan, out, resume: plans.append(plan)
                        or outs.append(out) or __import__("pandas").DataFrame({"status": []}))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["figures", "--smoke", "--model", "llama", "--precision", "fp32"]) == 0
    assert plans[-1].model == "llama" and outs[-1] == "runs/figures_llama_smoke"
    assert plans[-1].embds == fcli.SMOKE.embds and plans[-1].cap_mb == fcli.SMOKE.cap_mb
    assert cli.main(["figures", "--smoke", "--precision", "fp32"]) == 0
    assert plans[-1].model == "gpt2" and outs[-1] == "runs/figures_smoke"
    capsys.readouterr()
    assert cli.main(["figures", "--smoke", "--model", "gpt3"]) == 2
    err = capsys.readouterr().err
    assert err == ("nntile-lab figures: error: --model 'gpt3': unknown; choose from gpt2, "
                   "llama\n")
    # the records say their model: --from redraws, it does not choose one
    assert cli.main(["figures", "--from", str(tmp_path), "--model", "llama"]) == 2
    assert capsys.readouterr().err.startswith("nntile-lab figures: error: --model is for a "
                                              "measuring run")
    assert len(plans) == 2


@pytest.mark.slow
@pytest.mark.parametrize("system", ["nntile_lab", "torch_fp32"])
def test_one_tiny_real_llama_point(system):
    """Each system's point process trains the Llama (its own parameter bytes and FLOPs),
    through the engine, as ``nntile-lab figures --model llama`` runs it."""
    plan = replace(LLAMA, cap_mb=2048)
    res = run_point(plan, system, 4, 64)
    assert res["status"] == "ok", res.get("error")
    n = plan_params(4, 64, plan)
    assert res["spec"]["model"] == "llama" and res["params"] == n
    assert res["flops_per_step"] == model_config(4, 64, plan).flops_per_token(16) * 2 * 16
    assert res["gflops"] == pytest.approx(res["flops_per_step"] / res["step_time_s"] / 1e9)
    mem = res["memory"]
    assert mem["parameters"] == mem["gradients"] == 4 * n and mem["optimizer state"] == 8 * n
