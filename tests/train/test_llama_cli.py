"""``--model llama`` everywhere a model goes: ``train`` on the main job's kind of data (end to
end, the record naming the model, exact resume), ``trace``, ``plan``; and the Llama's bad
options, one line each (exit 2) before any task."""
import json

import pandas as pd
import pytest

import nntile_lab as nl
from nntile_lab import cli
from nntile_lab.optim import AdamW
from nntile_lab.train.schedule import WarmupCosine
from nntile_lab.train.trainer import train
from tests.torch_adapter import tiny_dataset

LLAMA = ["--model", "llama", "--n-layer", "2", "--n-head", "4", "--n-kv-head", "2",
         "--n-embd", "16", "--n-inner", "24", "--seq-len", "8", "--batch", "2",
         "--vocab-size", "64", "--batch-tile", "1", "--vocab-tile", "20", "--head-tile", "2",
         "--rope-theta", "500000", "--scheduler", "eager", "--ncpu", "1"]


CFG = dict(n_layer=2, n_head=4, n_kv_head=2, n_embd=16, n_inner=24, n_positions=8,
           vocab_size=64, batch_tile=1, seq_tile=3, head_tile=2, vocab_tile=20)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return tiny_dataset(tmp_path_factory.mktemp("data"))


def _train(data, out, steps, *extra):
    return cli.main(["train", "--steps", str(steps), "--out", str(out), "--data", str(data),
                     "--json", "--no-progress", "--eval-every", "3", "--eval-batches", "1",
                     "--checkpoint-every", "3", "--lr", "1e-2", *LLAMA, *extra])


def test_train_llama_end_to_end_and_resume(data, tmp_path, capsys):
    assert _train(data, tmp_path / "run", 6) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    losses = [r["loss"] for r in lines[:-1]]
    assert len(losses) == 6 and losses[-1] < losses[0]
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["spec"]["model"] == "llama" and record["spec"]["n_kv_head"] == 2
    assert record["config"]["model"]["rope_theta"] == 500000.0
    # --resume alone: the model (a Llama, its grouped heads and rotary base) is the
    # checkpoint's
    assert cli.main(["train", "--steps", "8", "--resume", str(tmp_path / "run"), "--json",
                     "--no-progress", "--data", str(data), "--eval-every", "3",
                     "--eval-batches", "1", "--lr", "1e-2", "--scheduler", "eager",
                     "--ncpu", "1"]) == 0
    resumed = [json.loads(x) for x in capsys.readouterr().out.splitlines()][:-1]
    assert [r["step"] for r in resumed] == [7, 8]
    assert json.loads((tmp_path / "run" / "run.json").read_text())["spec"]["model"] == "llama"


def test_an_interrupted_llama_run_resumes_exactly(data, tmp_path):
    """The trainer's checkpoint of a Llama (its parameters, AdamW state, data position):
    the losses after a resume are those of the run that was not interrupted."""
    def run(out, steps, resume=None, seed=0):
        with nl.Runtime(scheduler="eager", ncpu=1):   # one worker: bit-identical replays
            model = nl.Llama(nl.LlamaConfig(**CFG), seed=seed)
            opt = AdamW(model, lr=1e-2, weight_decay=0.1)
            return train(model, opt, data, steps=steps, batch=2, seq_len=8, out_dir=out,
                         schedule=WarmupCosine(1e-2, 2, 8, 1e-3), eval_every=3,
                         eval_batches=1, checkpoint_every=4, resume=resume, progress=False)
    full = run(tmp_path / "full", 8)
    run(tmp_path / "part", 4)
    resumed = run(tmp_path / "part", 8, resume=tmp_path / "part", seed=9)
    cols = ["step", "loss", "lr", "grad_norm"]
    pd.testing.assert_frame_equal(resumed[cols].reset_index(drop=True),
                                  full[cols].reset_index(drop=True))


def test_trace_and_plan_take_the_llama(data, tmp_path, capsys):
    out = tmp_path / "trace"
    assert cli.main(["trace", "--out", str(out), "--steps", "1", "--no-peak", "--json", "--",
                     "--data", str(data), *LLAMA]) == 0
    capsys.readouterr()
    tasks = pd.read_csv(out / "tasks.csv")
    assert {"rope", "rope_backward", "rms_norm_tile", "rms_norm_backward_tile",
            "silu_gate", "silu_gate_backward", "gemm", "adamw"} <= set(tasks["name"])
    assert cli.main(["plan", *LLAMA, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["verdict"] == "fits"


@pytest.mark.parametrize("bad,message", [
    (["--n-kv-head", "3"], "n_head=4 is not a multiple of n_kv_head=3"),
    (["--n-embd", "12", "--n-head", "4"], "head size n_embd/n_head = 12/4 = 3 is odd"),
    (["--rope-theta", "0"], "rope_theta=0.0 must be a finite number > 0"),
    (["--head-tile", "1"], "head_tile=1 is not a multiple of the query group"),
])
def test_bad_llama_options_are_one_line(bad, message, capsys):
    assert cli.main(["plan", *LLAMA, *bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_a_llama_option_without_the_llama_is_one_line(capsys):
    assert cli.main(["plan", "--n-kv-head", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "n_kv_head=2 (--n-kv-head) is a Llama option" in err[0], err


def test_bench_train_llama_against_the_pytorch_llama(tmp_path, capsys):
    """``bench train --model llama --vs-torch``: the same Llama step timed in PyTorch (the fast
    reference: fused GQA attention, F.rms_norm), FLOPs from the Llama's own tree."""
    assert cli.main(["bench", "train", "--vs-torch", "--json", "--steps", "2",
                     "--no-torch-compile", "--record", str(tmp_path / "bench.json"),
                     *LLAMA]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["torch"]["eager"]["model"] == "torch_llama"
    assert res["spec"]["model"] == "llama" and res["spec"]["n_kv_head"] == 2
    cfg = nl.LlamaConfig(n_layer=2, n_head=4, n_kv_head=2, n_embd=16, n_inner=24,
                         n_positions=8, vocab_size=64)
    assert res["flops_per_step"] == 2 * 8 * cfg.flops_per_token(8)
    assert res["ratio"] == pytest.approx(res["nntile_gflops"] / res["torch_gflops"])
