"""``bench memory``: ``--precision`` runs the same model under the same RAM cap out of core in
each precision (interleaved), disk bytes per step and throughput against the first precision;
``--device`` is the paper's setting in miniature as rows — the same model on the CPU workers,
on an uncapped OpenCL device and on one capped below the model, RAM as its overflow (each
point in a fresh process)."""
import json

import pytest

from nntile_lab import cli
from nntile_lab.bench import memory


def _fake_measure(calls):
    """A point's result whose disk bytes and times depend on its precision and place."""
    def measure(spec, system="nntile", timeout=0):
        ooc = spec.ooc_dir is not None
        calls.append((spec.precision, ooc, spec.n_embd, spec.memory_limit_mb))
        disk = {"fp32": 1000.0, "bf16": 550.0}[spec.precision] if ooc else 0.0
        t = ({"fp32": 4.0, "bf16": 2.5}[spec.precision] if ooc else 1.0) + 0.01 * len(calls)
        return {"step_time_s": t, "step_times_s": [t, t + 1], "disk_bytes_per_step": disk,
                "disk_read_per_step": disk * 0.6, "disk_written_per_step": disk * 0.4,
                "peak_rss_bytes": 1 << 28, "starpu_peak_bytes": 1 << 27}
    return measure


def test_precisions_share_model_and_cap_and_interleave(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(memory, "measure", _fake_measure(calls))
    res = memory.run_precisions((512,), ("fp32", "bf16"), ooc_dir=str(tmp_path), speeds=(2,),
                                repeats=2, progress=lambda m: None)
    # each round: fp32 in memory, fp32 out of core, bf16 in memory, bf16 out of core
    assert [(p, o) for p, o, _, _ in calls] == [("fp32", False), ("fp32", True),
                                                ("bf16", False), ("bf16", True)] * 2
    # one model, and one StarPU RAM cap (the fp32 model's) for every out-of-core run
    assert len({e for _, _, e, _ in calls}) == 1
    limits = {lim for _, o, _, lim in calls if o}
    assert len(limits) == 1 and None not in limits
    assert {lim for _, o, _, lim in calls if not o} == {None}
    fp32, bf16 = res["table"]
    assert (fp32["precision"], bf16["precision"]) == ("fp32", "bf16")
    assert bf16["disk_vs_first"] == pytest.approx(0.55) and "disk_vs_first" not in fp32
    assert bf16["ooc_speed_vs_first"] == pytest.approx(fp32["ooc_step_s"] / bf16["ooc_step_s"])
    assert fp32["runs"] == 2 and fp32["throughput_vs_in_memory"] == pytest.approx(
        fp32["ram_step_s"] / fp32["ooc_step_s"])
    text = memory.report_precisions(res)
    assert "disk/fp32" in text and "0.55" in text
    with pytest.raises(ValueError, match="precisions"):
        memory.run_precisions((512,), ("fp32", "fp32"))
    with pytest.raises(ValueError, match="not a spec field"):
        memory.run_precisions((512,), ("fp32",), precision="bf16")


def test_cli_precision_list(monkeypatch, capsys):
    got = {}
    monkeypatch.setattr(memory, "run_precisions", lambda caps, precs, **kw: got.update(
        caps=caps, precs=precs, **kw) or {"rows": [], "table": [{"precision": "fp32"}],
                                          "caps_mb": caps, "precisions": list(precs)})
    argv = ["bench", "memory", "--precision", "fp32,bf16", "--caps", "256", "--speeds", "2",
            "--repeats", "3", "--ooc-dir", "/tmp/x", "--json"]
    assert cli.main(argv) == 0
    assert got["caps"] == [256] and got["precs"] == ("fp32", "bf16")
    assert got["speeds"] == (2,) and got["repeats"] == 3 and got["ooc_dir"] == "/tmp/x"
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["precisions"] == ["fp32",
                                                                               "bf16"]
    # model options change the family's; --n-embd pins the model
    assert cli.main(argv + ["--seq-len", "512", "--batch", "8", "--n-embd", "256"]) == 0
    assert got["widths"] == (256,) and (got["seq_len"], got["batch"]) == (512, 8)
    assert "n_embd" not in got
    capsys.readouterr()
    # one precision: the capacity experiment in it, for both systems
    monkeypatch.setattr(memory, "run", lambda caps, **kw: got.update(one=kw) or {
        "rows": [{}], "summary": {}})
    monkeypatch.setattr(memory, "report", lambda res: "")
    assert cli.main(["bench", "memory", "--precision", "bf16", "--caps", "256"]) == 0
    assert got["one"]["precision"] == "bf16"
    for bad in ("fp16", "fp32,fp32", "auto", ","):
        assert cli.main(["bench", "memory", "--precision", bad]) == 2
        assert f"--precision {bad!r}" in capsys.readouterr().err
    assert cli.main(["bench", "memory", "--precision", "fp32,bf16", "--hints"]) == 2


def test_torch_point_runs_the_peer_precision():
    """PyTorch's point of the capacity experiment in bf16 runs bf16 autocast."""
    from nntile_lab.spec import ExperimentSpec
    spec = ExperimentSpec(n_layer=1, n_head=2, n_embd=64, vocab_size=50, seq_len=8, batch=2,
                          warmup_steps=0, measure_steps=1, precision="bf16")
    assert memory.torch_point(spec)["precision"] == "bf16"
    assert memory.torch_point(spec.replace(precision="bf16-storage"))["precision"] == "fp32"


MIB = 1 << 20
SMALL = dict(vocab_size=8192, vocab_tile=2048, n_layer=2, seq_len=64, batch=4, batch_tile=4,
             warmup_steps=1, measure_steps=1)


@pytest.mark.slow
def test_device_rows_show_the_capped_device_spilling_to_ram():
    res = memory.run_device(16, (4,), widths=(128, 256), progress=lambda m: None,
                            **SMALL)
    rows = {r["setting"]: r for r in res["rows"]}
    assert set(rows) == {s for s, _ in memory.DEVICE_SETTINGS}
    for r in rows.values():
        assert "error" not in r, r
        assert r["n_embd"] == 256 and r["multiple"] == 4   # 77 MiB planned: nearest 64
    cpu, free, capped = rows["cpu"], rows["device"], rows["device_capped"]
    assert "buses" not in cpu and "device_peak_bytes" not in cpu
    assert capped["device_cap_mb"] == 16 and free["device_cap_mb"] is None
    assert capped["device_peak_bytes"] <= 16 * MIB < free["device_peak_bytes"]
    # under the cap the tiles go back and forth: more traffic each way than uncapped
    for way in ("ram_to_device_per_step", "device_to_ram_per_step"):
        assert capped[way] > 1.5 * free[way] and capped[way] > 16 * MIB
    assert capped["ram_to_device_transfers_per_step"] > 0
    assert {(b["src"], b["dst"]) for b in capped["buses"]} == {("NUMA 0", "OpenCL 0"),
                                                               ("OpenCL 0", "NUMA 0")}
    text = memory.report_device(res)
    assert "device capped → RAM" in text and "device cap 16 MiB" in text


def test_cli_device_options_are_checked():
    for bad in (["--device-cap-mb", "8"], ["--multiples", "0"]):
        try:
            rc = cli.main(["bench", "memory", "--device", *bad, "--json"])
        except SystemExit as exc:
            rc = exc.code
        assert rc == 2, bad


@pytest.mark.parametrize("argv,said", [
    (["--device-cap-mb", "32"], "--device-cap-mb applies only to --device, not to the "
                                "capacity experiment"),
    (["--multiples", "2"], "--multiples applies only to --device"),
    (["--device", "--hints"], "--device and --hints are two experiments: give one of them"),
    (["--device", "--caps", "100"], "--caps applies only to --precision A,B or the capacity "
                                    "experiment"),
    (["--device", "--n-layer", "2"], "--n-layer applies only to --hints or --precision A,B, "
                                     "not to --device"),
    (["--hints", "--widths", "128"], "--widths applies only to"),
    (["--fraction", "0.3"], "--fraction applies only to --hints"),
    (["--n-embd", "128"], "--n-embd applies only to --hints or --precision A,B"),
    (["--precision", "fp32,bf16", "--max-width", "256"], "--max-width applies only to the "
                                                         "capacity experiment"),
])
def test_an_option_of_another_experiment_is_refused_not_ignored(monkeypatch, capsys, argv,
                                                                  said):
    """bench memory has four experiments; an option only another one reads used to be
    dropped silently (``--device-cap-mb`` without ``--device``, ``--device --hints``)."""
    for name in ("run", "run_device", "run_hints", "run_precisions"):
        monkeypatch.setattr(memory, name, lambda *a, **k: pytest.fail("ran"))
    assert cli.main(["bench", "memory", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"nntile-lab bench memory: error: {said}") and err.count("\n") == 1


def test_each_experiment_takes_its_own_options(monkeypatch):
    got = {}
    monkeypatch.setattr(memory, "run_device", lambda cap, multiples, **kw: got.update(
        device=(cap, multiples)) or {"rows": [{}]})
    monkeypatch.setattr(memory, "report_device", lambda res: "")
    assert cli.main(["bench", "memory", "--device", "--device-cap-mb", "32",
                     "--multiples", "2"]) == 0
    assert got["device"] == (32, (2,))
    monkeypatch.setattr(memory, "run_hints", lambda spec, **kw: got.update(
        hints=(spec.n_layer, kw["fraction"])) or {"table": [{}]})
    monkeypatch.setattr(memory, "report_hints", lambda res: "")
    assert cli.main(["bench", "memory", "--hints", "--fraction", "0.25", "--n-layer", "2"]) == 0
    assert got["hints"] == (2, 0.25)


def test_device_rows_say_the_multiple_the_model_has(monkeypatch):
    """The family's smallest member at a small cap is many times the cap: it was labelled
    "1x the cap"; now the model's own multiple, and the one asked beside it."""
    fake = {"step_time_s": 1.0, "starpu_peak_bytes": 0, "device_peak_bytes": 0}
    monkeypatch.setattr(memory, "measure", lambda spec, system="nntile": dict(fake))
    said = []
    res = memory.run_device(16, (1,), widths=(128,), progress=said.append, **SMALL)
    planned = res["rows"][0]["planned_peak_bytes"] / (16 * MIB)
    assert planned > 2 and all(r["actual_multiple"] == planned for r in res["rows"])
    assert said[0].startswith(f"{planned:.1f}x the cap (nearest to 1x) (E=128)")
    assert "1x the cap" not in " ".join(said)
    assert f"{planned:.1f}x E=128" in memory.report_device(res)
    assert memory._multiple(2, 2.2) == "2.2x the cap"
