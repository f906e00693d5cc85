"""The trainer with the tiled GPT-2 itself (the trainer's own tests use a PyTorch
stand-in): exact resume, the CLI end to end, and `nntile-lab trace` on real steps."""
import json

import numpy as np
import pandas as pd
import pytest

import nntile_lab as nl
from nntile_lab import cli
from nntile_lab.optim import AdamW
from nntile_lab.train.schedule import WarmupCosine
from nntile_lab.train.trainer import train
from tests.torch_adapter import tiny_dataset

CFG = dict(n_layer=2, n_head=2, n_embd=16, n_positions=8, vocab_size=64, batch_tile=1,
           seq_tile=3, embd_tile=6, inner_tile=24, head_tile=1, vocab_tile=20)
MODEL_ARGS = ["--n-layer", "2", "--n-head", "2", "--n-embd", "16", "--seq-len", "8",
              "--batch", "2", "--vocab-size", "64", "--batch-tile", "1", "--vocab-tile", "20"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return tiny_dataset(tmp_path_factory.mktemp("data"))


def run(data, out, steps, resume=None, seed=0):
    with nl.Runtime(scheduler="eager", ncpu=1):      # one worker: bit-identical replays
        model = nl.GPT2(nl.GPT2Config(**CFG), seed=seed)
        opt = AdamW(model, lr=1e-2, weight_decay=0.1)
        return train(model, opt, data, steps=steps, batch=2, seq_len=8, out_dir=out,
                     schedule=WarmupCosine(1e-2, 2, 10, 1e-3), eval_every=3, eval_batches=2,
                     checkpoint_every=4, resume=resume, progress=False)


def test_resume_gives_the_losses_of_an_uninterrupted_run(data, tmp_path):
    full = run(data, tmp_path / "full", steps=10)
    run(data, tmp_path / "part", steps=4)
    resumed = run(data, tmp_path / "part", steps=10, resume=tmp_path / "part", seed=9)
    cols = ["step", "loss", "lr", "grad_norm"]
    pd.testing.assert_frame_equal(resumed[cols].reset_index(drop=True),
                                  full[cols].reset_index(drop=True))
    assert full["loss"].iloc[-1] < full["loss"].iloc[0]


def test_train_cli_end_to_end(data, tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["train", "--steps", "3", "--out", str(out), "--data", str(data),
                     "--json", "--no-progress", "--eval-every", "3", "--eval-batches", "1",
                     *MODEL_ARGS]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["step"] for r in lines[:-1]] == [1, 2, 3] and lines[-1]["summary"] is True
    assert {"loss", "lr", "tokens_per_s", "gflops"} <= lines[0].keys()
    assert (out / "loss.png").stat().st_size > 0 and (out / "checkpoint").is_dir()
    record = json.loads((out / "run.json").read_text())
    assert record["config"]["model"]["n_embd"] == 16


def test_trace_cli_on_real_steps(data, tmp_path, capsys):
    out = tmp_path / "trace"
    assert cli.main(["trace", "--out", str(out), "--steps", "2", "--no-peak", "--json", "--",
                     "--data", str(data), *MODEL_ARGS]) == 0
    summary = json.loads(capsys.readouterr().out)
    tasks = pd.read_csv(out / "tasks.csv")
    assert summary["tasks"] == len(tasks) > 0
    assert set(tasks["phase"]) == {"forward", "backward", "optimizer"}
    # blocks 0 and 1, the head as layer 2 (the embeddings count as layer 0)
    assert set(tasks.loc[tasks["phase"] == "forward", "layer"]) == {0, 1, 2}
    assert {"gemm", "softmax_tile", "layer_norm_tile", "adamw", "embedding"} <= set(tasks["name"])
    assert np.all(tasks["end_us"] >= tasks["start_us"])
    for f in ("gantt.png", "utilisation.png", "memory.png", "trace.json"):
        assert (out / f).stat().st_size > 0


def test_results_do_not_depend_on_scheduler_or_workers():
    """Accumulations run in submission order (no commuting sums), so any scheduler
    and any worker count give bit-identical losses and gradients."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 64, (3, 9))
    results = []
    for sched, ncpu in (("eager", 1), ("lws", 2), ("dmda", 2), ("ws", 2)):
        with nl.Runtime(scheduler=sched, ncpu=ncpu):
            model = nl.GPT2(nl.GPT2Config(**CFG), seed=1)
            results.append((model.forward_backward(ids[:, :-1], ids[:, 1:]),
                            model.grad_state_dict()))
    for loss, grads in results[1:]:
        assert loss == results[0][0]
        assert all(np.array_equal(g, results[0][1][k]) for k, g in grads.items())
