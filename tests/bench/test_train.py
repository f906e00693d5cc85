"""``bench train``: nntile_lab against PyTorch in one run, in a precision and its peer, with
the fp32 pair beside it, the series interleaved round by round."""
import statistics

import pytest

from tests.conftest import require

require("torch")

from nntile_lab import cli  # noqa: E402
from nntile_lab.bench import torch_baseline, train  # noqa: E402
from nntile_lab.spec import ExperimentSpec  # noqa: E402

TINY = ExperimentSpec(n_layer=1, n_head=2, n_embd=64, seq_len=16, batch=2, vocab_size=100,
                      measure_steps=2, warmup_steps=0)


def test_series_pair_each_precision_with_its_peer():
    assert train._series("bf16", True, True, True) == [
        ("nntile", "bf16"), ("eager", "bf16"), ("compiled", "bf16"),
        ("nntile", "fp32"), ("eager", "fp32"), ("compiled", "fp32")]
    # bf16 storage computes in fp32: its PyTorch peer is fp32, measured once
    assert train._series("bf16-storage", True, False, True) == [
        ("nntile", "bf16-storage"), ("eager", "fp32"), ("nntile", "fp32")]
    assert train._series("fp32", False, True, False) == [("nntile", "fp32")]


def test_rounds_interleave_and_pool(monkeypatch):
    """Every series once per round, in order; times pooled over rounds; ratios of the
    pooled medians, each round's own ratio beside them."""
    calls, clock = [], iter(range(1, 1000))

    def nntile(spec):
        calls.append(("nntile", spec.precision))
        return [float(next(clock)) for _ in range(spec.measure_steps)], 2

    def torch_measure(spec, threads, compile=False, bf16=False):
        calls.append(("compiled" if compile else "eager", "bf16" if bf16 else "fp32"))
        t = [float(next(clock)) for _ in range(spec.measure_steps)]
        return {"step_times_s": t, "compile": compile, "threads": threads, "adamw": "fused",
                "compile_time_s": 0.0, "precision": "bf16" if bf16 else "fp32"}

    monkeypatch.setattr(train, "_nntile_step_times", nntile)
    monkeypatch.setattr(torch_baseline, "measure", torch_measure)
    monkeypatch.setattr(torch_baseline, "cpu_has_bf16", lambda: True)
    monkeypatch.setattr(train.sgemm_peak, "gflops", lambda at_least=None: 100.0)
    res = train.run(TINY.replace(precision="bf16"), with_fp32=True, rounds=3)
    one_round = train._series("bf16", True, True, True)
    assert calls == one_round * 3
    assert res["order"] == ["nntile_lab bf16", "PyTorch bf16 eager", "PyTorch bf16 compiled",
                            "nntile_lab fp32", "PyTorch fp32 eager", "PyTorch fp32 compiled"]
    # nntile bf16's steps are the 1st-2nd, 13th-14th, 25th-26th clock ticks
    assert res["nntile_step_times_s"] == [1.0, 2.0, 13.0, 14.0, 25.0, 26.0]
    assert res["nntile_step_s"] == statistics.median([1, 2, 13, 14, 25, 26])
    assert res["torch_best"] == "eager" and res["torch_precision"] == "bf16"
    assert res["ratio"] == pytest.approx(res["torch_step_s"] / res["nntile_step_s"])
    assert res["round_ratios"] == pytest.approx([3.5 / 1.5, 15.5 / 13.5, 27.5 / 25.5])
    assert res["fp32"]["nntile_step_times_s"] == [7.0, 8.0, 19.0, 20.0, 31.0, 32.0]
    assert res["vs_own_fp32"] == pytest.approx(19.5 / 13.5)
    assert res["torch_vs_own_fp32"] == pytest.approx(res["fp32"]["torch_step_s"]
                                                     / res["torch_step_s"])
    assert res["nntile_mfu"] is None and res["fp32"]["nntile_mfu"] > 0
    with pytest.raises(ValueError, match="rounds=0"):
        train.run(TINY, rounds=0)


def test_bf16_against_pytorch_bf16_for_real():
    """A real run, tiny model: nntile_lab bf16 and PyTorch bf16 autocast, the fp32 pair."""
    prec = "bf16" if torch_baseline.cpu_has_bf16() else "bf16-storage"
    res = train.run(TINY.replace(precision=prec), torch_compile=False, with_fp32=True,
                    rounds=2)
    peer = "bf16" if prec == "bf16" else "fp32"
    assert res["precision"] == prec and res["torch_precision"] == peer
    assert res["torch"]["eager"]["precision"] == peer and res["torch"]["eager"]["bf16"] == (
        peer == "bf16")
    assert len(res["nntile_step_times_s"]) == 4 and len(res["round_ratios"]) == 2
    assert res["ratio"] == pytest.approx(res["nntile_gflops"] / res["torch_gflops"])
    assert res["vs_own_fp32"] == pytest.approx(res["nntile_gflops"]
                                               / res["fp32"]["nntile_gflops"])
    assert res["spec"]["precision"] == prec and res["fp32"]["precision"] == "fp32"
    text = train.report(res)
    assert f"nntile_lab {prec} / own fp32" in text and f"PyTorch {peer}" in text


def test_pytorch_bf16_needs_bf16_hardware(monkeypatch, capsys):
    monkeypatch.setattr(torch_baseline, "cpu_has_bf16", lambda: False)
    called = []
    monkeypatch.setattr(train, "run", lambda *a, **k: called.append(1))
    code = cli.main(["bench", "train", "--vs-torch", "--precision", "bf16", "--n-layer", "1"])
    assert code == 2 and not called
    err = capsys.readouterr().err
    assert "avx512_bf16" in err and "--precision fp32 or bf16-storage" in err


def test_auto_is_resolved_once_and_recorded(monkeypatch):
    seen, chosen = [], []
    monkeypatch.setattr(train.experiment, "choose_precision",
                        lambda spec: chosen.append(spec.precision) or ("bf16", "peaks 3x"))
    monkeypatch.setattr(train, "_nntile_step_times",
                        lambda spec: seen.append(spec.precision) or ([1.0], 2))
    monkeypatch.setattr(train.sgemm_peak, "gflops", lambda at_least=None: 100.0)
    res = train.run(TINY.replace(precision="auto"), vs_torch=False, with_fp32=True, rounds=2)
    assert chosen == ["auto"] and seen == ["bf16", "fp32"] * 2
    assert (res["precision"], res["precision_asked"]) == ("bf16", "auto")
    assert "auto: peaks 3x" in train.report(res)


def test_warmup_and_measured_steps_reach_both_systems(monkeypatch):
    """``--warmup-steps`` and ``--steps`` set the spec that both nntile_lab's and PyTorch's
    series run (each warms up that many untimed steps itself)."""
    seen = []
    monkeypatch.setattr(train, "run", lambda spec, **kw: seen.append(spec) or {})
    monkeypatch.setattr(train, "report", lambda res: "")
    monkeypatch.setattr(train, "check_torch_precision", lambda prec: None)
    assert cli.main(["bench", "train", "--warmup-steps", "2", "--steps", "4", "--n-layer",
                     "1"]) == 0
    assert (seen[0].warmup_steps, seen[0].measure_steps, seen[0].n_layer) == (2, 4, 1)
    assert cli.main(["bench", "train", "--warmup-steps", "two"]) == 2
