"""The training loop with the PyTorch adapter: logging, evaluation, exact resumption after
a crash, non-finite losses, schedules, plots and run records."""
import json
import math
import os

import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure

from nntile_lab.engine.facts import starpu_version
from nntile_lab.train import (
    Constant,
    NonFiniteLoss,
    WarmupCosine,
    load_checkpoint,
    plot_loss,
    save_loss_plot,
    train,
    write_run_record,
)
from tests.torch_adapter import TinyConfig, TorchAdamW, TorchModel, tiny_dataset

SEQ, BATCH = 16, 4


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One thread: bitwise-reproducible torch arithmetic for the resume comparisons."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return tiny_dataset(tmp_path_factory.mktemp("data"))


def make(seed=0, **cfg):
    model = TorchModel(TinyConfig(**cfg), seed=seed)
    return model, TorchAdamW(model, lr=1e-2)


def run(data, out, model=None, opt=None, **kw):
    if model is None:
        model, opt = make()
    kw = {"steps": 12, "batch": BATCH, "seq_len": SEQ, "schedule": WarmupCosine(1e-2, 3, 12,
          1e-3), "eval_every": 4, "eval_batches": 2, "checkpoint_every": 5, "progress": False,
          **kw}
    return train(model, opt, data, out_dir=out, **kw)


class NaNAfter(TorchModel):
    """Returns NaN from the given forward_backward call on (a diverging model)."""

    def __init__(self, calls, **kw):
        super().__init__(TinyConfig(**kw))
        self.left = calls

    def forward_backward(self, *args, **kw):
        loss = super().forward_backward(*args, **kw)
        self.left -= 1
        return loss if self.left >= 0 else math.nan


def test_schedule_warmup_then_cosine():
    s = WarmupCosine(lr=1.0, warmup_steps=4, total_steps=14, min_lr=0.1)
    assert [s(i) for i in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert s(4) == 1.0
    assert s(9) == pytest.approx(0.55)  # half way down the cosine: (lr + min_lr) / 2
    assert s(13) == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi * 0.9)))
    assert s(14) == s(1000) == 0.1
    lrs = [s(i) for i in range(4, 15)]
    assert all(a > b for a, b in zip(lrs, lrs[1:]))
    assert WarmupCosine(2.0, 0, 0)(0) == 0.0 and Constant(3e-4)(99) == 3e-4
    for kw, needle in [({"lr": 0}, "lr must be > 0"), ({"min_lr": 2}, r"min_lr must lie"),
                       ({"warmup_steps": -1}, "warmup_steps must be >= 0"),
                       ({"total_steps": 2}, "total_steps=2 must be >= warmup_steps=4")]:
        with pytest.raises(ValueError, match=needle):
            WarmupCosine(**{"lr": 1.0, "warmup_steps": 4, "total_steps": 14, **kw})


def test_train_logs_evaluates_checkpoints_and_learns(data, tmp_path):
    model, opt = make()
    log = run(data, tmp_path, model, opt, steps=40, eval_every=10,
              schedule=WarmupCosine(1e-2, 4, 40, 1e-3))
    assert list(log.columns) == ["step", "loss", "lr", "grad_norm", "tokens", "time_s",
                                 "tokens_per_s", "gflops", "val_loss"]
    assert log["step"].tolist() == list(range(1, 41))
    assert log["tokens"].tolist() == [BATCH * SEQ * s for s in range(1, 41)]
    assert log["lr"].tolist() == [WarmupCosine(1e-2, 4, 40, 1e-3)(s) for s in range(40)]
    assert log.dropna(subset=["val_loss"])["step"].tolist() == [10, 20, 30, 40]
    assert log["loss"].iloc[-5:].mean() < log["loss"].iloc[:5].mean() - 1.0  # it learns
    assert (log["grad_norm"] > 0).all() and (log["tokens_per_s"] > 0).all()
    fpt = model.flops_per_token(SEQ)
    np.testing.assert_allclose(log["gflops"] / log["tokens_per_s"], fpt / 1e9, rtol=1e-9)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "log.csv"), log, check_dtype=False)
    ck = load_checkpoint(tmp_path)
    assert ck.state["step"] == 40 and ck.state["config"]["n_embd"] == 32
    assert all(np.array_equal(v, model.state_dict()[k]) for k, v in ck.model_state.items())
    s = log.attrs["summary"]
    assert s["steps"] == 40 and s["final_loss"] == log["loss"].iloc[-1]
    assert s["best_val_loss"] == log["val_loss"].min()
    assert s["final_val_loss"] == log["val_loss"].iloc[-1]
    assert s["tokens"] == 40 * BATCH * SEQ and s["out_dir"] == str(tmp_path)


def test_resume_after_crash_matches_uninterrupted_run(data, tmp_path):
    full_model, full_opt = make()
    full = run(data, tmp_path / "full", full_model, full_opt, grad_accum=2)
    crashing = NaNAfter(calls=2 * 12)  # NaN in step 13's first micro-batch
    with pytest.raises(NonFiniteLoss, match="the training loss is nan at step 13") as e:
        run(data, tmp_path / "crash", crashing, TorchAdamW(crashing, lr=1e-2), grad_accum=2,
            steps=16, schedule=WarmupCosine(1e-2, 3, 12, 1e-3))
    assert e.value.step == 13 and math.isnan(e.value.value)
    assert load_checkpoint(tmp_path / "crash").state["step"] == 10  # the last good one
    assert pd.read_csv(tmp_path / "crash" / "log.csv")["step"].tolist() == list(range(1, 13))
    # a fresh process would build a model with any weights: the checkpoint replaces them
    model, opt = make(seed=5)
    resumed = run(data, tmp_path / "crash", model, opt, grad_accum=2,
                  resume=tmp_path / "crash" / "checkpoint")
    pd.testing.assert_frame_equal(resumed[["step", "loss", "lr", "grad_norm", "val_loss"]],
                                  full[["step", "loss", "lr", "grad_norm", "val_loss"]])
    for k, v in full_model.state_dict().items():
        assert np.array_equal(model.state_dict()[k], v), k


def test_resume_mid_run_then_extend(data, tmp_path):
    full = run(data, tmp_path / "full", steps=12)
    run(data, tmp_path / "part", steps=7)  # an interrupted run: its checkpoint is at step 7
    assert load_checkpoint(tmp_path / "part").state["step"] == 7
    model, opt = make(seed=3)
    resumed = run(data, tmp_path / "part", model, opt, steps=12, resume=tmp_path / "part")
    assert resumed["loss"].tolist() == full["loss"].tolist()
    # the same validation losses, plus the one that ended the interrupted run at step 7
    assert resumed.dropna(subset=["val_loss"])["step"].tolist() == [4, 7, 8, 12]
    assert resumed["val_loss"].drop(index=6).equals(full["val_loss"].drop(index=6))
    assert resumed["time_s"].is_monotonic_increasing
    model, opt = make()
    with pytest.warns(UserWarning, match="changed settings \\(batch 4 -> 2\\)"):
        run(data, tmp_path / "part", model, opt, steps=13, batch=2, resume=tmp_path / "part")


def test_json_lines_and_log_every(data, tmp_path, capsys):
    log = run(data, tmp_path, steps=10, log_every=3, json_lines=True)
    lines = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    assert [r["step"] for r in lines[:-1]] == log["step"].tolist() == [3, 4, 6, 8, 9, 10]
    for r in lines[:-1]:
        assert {"step", "loss", "lr", "tokens_per_s", "gflops"} <= r.keys()
        assert ("val_loss" in r) == (r["step"] in (4, 8, 10))
    summary = lines[-1]
    assert summary["summary"] is True and summary["steps"] == 10
    assert summary["final_loss"] == lines[-2]["loss"] and summary["out_dir"] == str(tmp_path)
    assert summary["best_val_loss"] == min(r["val_loss"] for r in lines if "val_loss" in r)
    assert summary["tokens_per_s"] > 0 and summary["gflops"] > 0


def test_nan_before_first_checkpoint_writes_none(data, tmp_path):
    model = NaNAfter(calls=2)
    with pytest.raises(NonFiniteLoss, match="at step 3"):
        run(data, tmp_path, model, TorchAdamW(model))
    assert not (tmp_path / "checkpoint").exists()


def test_infinite_gradient_norm_stops(data, tmp_path):
    model, opt = make()
    opt.step = lambda lr, clip: math.inf
    with pytest.raises(NonFiniteLoss, match="the gradient norm is inf at step 1"):
        run(data, tmp_path, model, opt)


def test_constant_lr_from_optimizer_and_no_eval(data, tmp_path):
    log = run(data, tmp_path, schedule=None, steps=3, eval_every=0)
    assert log["lr"].tolist() == [1e-2] * 3 and log["val_loss"].isna().all()
    assert log.attrs["summary"]["best_val_loss"] is None  # JSON-ready: null, not NaN


@pytest.mark.parametrize(("kw", "error", "needle"), [
    ({"steps": 0}, ValueError, "steps must be an integer >= 1, got 0"),
    ({"batch": 2.5}, ValueError, "batch must be an integer >= 1, got 2.5"),
    ({"eval_every": -1}, ValueError, "eval_every must be an integer >= 0"),
    ({"clip_norm": 0}, ValueError, "clip_norm must be > 0 or None"),
    ({"seq_len": 17}, ValueError, "seq_len=17 exceeds the model's n_positions=16"),
    ({"schedule": "cosine"}, TypeError, "schedule must be a callable"),
])
def test_bad_arguments(data, tmp_path, kw, error, needle):
    with pytest.raises(error, match=needle):
        run(data, tmp_path, **kw)


def test_missing_data_and_small_validation_split(tmp_path):
    with pytest.raises(FileNotFoundError, match="train.bin"):
        run(tmp_path / "nodata", tmp_path / "out")
    tiny_dataset(tmp_path, n_val=40)
    with pytest.raises(ValueError, match="val.bin holds 40 tokens, fewer than the 65"):
        run(tmp_path, tmp_path / "out")


def test_resume_errors_name_the_problem(data, tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        run(data, tmp_path / "a", resume=missing)
    run(data, tmp_path / "b", steps=2)
    model, opt = make(n_embd=16, embd_tile=8)
    with pytest.raises(ValueError, match=r"n_embd: checkpoint 32 vs model 16") as e:
        run(data, tmp_path / "b", model, opt, resume=tmp_path / "b")
    assert "embd_tile" not in str(e.value)


def test_plot_loss_and_png(data, tmp_path):
    log = run(data, tmp_path, steps=8)
    fig = plot_loss(log, title="tiny")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "optimizer step" and "loss" in ax.get_ylabel()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["train loss",
                                                                    "validation loss"]
    assert ax.lines[1].get_xdata().tolist() == [4, 8]
    path = save_loss_plot(log, tmp_path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_run_record(tmp_path):
    path = write_run_record(tmp_path, {"model": {"n_layer": 1}},
                            {"final_loss": 1.5, "best_val_loss": math.nan})
    rec = json.loads(path.read_text())  # standard JSON: NaN became null
    assert rec["config"] == {"model": {"n_layer": 1}}
    assert rec["results"] == {"final_loss": 1.5, "best_val_loss": None}
    assert {"python", "numpy", "nntile_lab", "starpu"} <= rec["versions"].keys()
    assert rec["versions"]["starpu"] == starpu_version()
    assert rec["machine"]["cores"] == os.cpu_count() and rec["machine"]["memory_gib"] > 0
    assert rec["schema"] == 2 and rec["kind"] == "train" and "isa" in rec["machine"]
    assert rec["status"] == "fits" and rec["cpu_variant"]
    assert rec["date"][:2] == "20"


def test_train_and_step_function_take_the_same_steps(data, tmp_path):
    """One step loop: ``train`` and ``experiment.step_function`` (traces, sweeps,
    benchmarks) run the same gradient-accumulation step, so from the same weights, data
    and seed they reach the same weights (torch on one thread: bitwise)."""
    from nntile_lab.data.bins import load_split
    from nntile_lab.experiment import step_function
    from nntile_lab.spec import ExperimentSpec

    schedule = WarmupCosine(1e-2, 1, 3, 1e-3)
    model, opt = make()
    run(data, tmp_path, model, opt, steps=3, grad_accum=3, schedule=schedule, eval_every=0,
        seed=7)

    class NoRuntime:
        def wait(self):
            pass

    spec = ExperimentSpec(batch=BATCH, seq_len=SEQ, grad_accum=3, seed=7)
    other, other_opt = make()
    step = step_function(spec, NoRuntime(), other, other_opt, schedule,
                         load_split(data, "train"))
    for k in range(3):
        step(k)
    for k, v in model.state_dict().items():
        assert np.array_equal(other.state_dict()[k], v), k


def test_a_non_finite_loss_stops_the_step_before_the_update(data):
    from nntile_lab.data.bins import load_split
    from nntile_lab.experiment import NonFiniteValue, train_step
    model = NaNAfter(calls=1)
    opt = TorchAdamW(model, lr=1e-2)
    before = model.state_dict()
    with pytest.raises(NonFiniteValue, match="the training loss is nan"):
        train_step(model, opt, load_split(data, "train"), np.random.default_rng(0),
                   batch=BATCH, seq_len=SEQ, grad_accum=2, lr=1e-2, clip_norm=1.0)
    for k, v in model.state_dict().items():
        assert np.array_equal(before[k], v), k
