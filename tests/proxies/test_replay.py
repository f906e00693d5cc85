"""The proxies replayed with mpi4py under mpirun (-n 2 and -n 4), and the CLI."""
import json

import pytest

from nntile_lab.cli import main
from nntile_lab.proxies import models, replay


@pytest.mark.parametrize("model,layout", [
    ("gpt2", dict(data=2)),
    ("gpt2", dict(pipeline=2, data=2)),
    ("gpt3", dict(tensor=2, pipeline=2)),
    ("cosmoflow", dict(tensor=4)),
    ("dlrm", dict(data=4)),
])
def test_replay_under_mpirun(model, layout):
    kw = dict(model=model, config_name={"gpt2": "small", "gpt3": "small"}.get(model),
              seq_len=64 if model.startswith("gpt") else None,
              grad_accum=2 if model.startswith("gpt") else None, tflops=50.0, **layout)
    proxy = models.build(**kw)
    res = replay.launch(kw, iterations=2, scale=4 if model == "cosmoflow" else 1, timeout=240)
    rows = res["ranks"]
    assert [r["rank"] for r in rows] == list(range(proxy.layout.world))
    want = proxy.bytes_per_rank()
    for r in rows:
        assert r["bytes"] == want[r["rank"]] > 0
        # sleeping at least the modelled time; exposed time is a part of the iteration
        assert r["compute_s"] >= 0.9 * r["modelled_compute_s"]
        assert 0 < r["exposed_s"] <= r["iteration_s"]
        assert r["comm_s"] > 0
    assert res["iteration_s"] >= max(r["modelled_compute_s"] for r in rows)


def test_replay_refuses_buffers_beyond_memory():
    with pytest.raises(RuntimeError, match="--scale"):
        replay.launch(dict(model="gpt3", config_name="175b", data=2, bucket="stage"),
                      iterations=1, timeout=120)


def test_cli_dry_run_json(capsys):
    assert main(["proxy", "gpt2", "--config", "large", "--seq-len", "632", "--micro-batch",
                 "1", "--pipeline", "4", "--data", "2", "--dry-run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["world"] == 8
    assert {m["count"] for m in out["messages"] if m["op"] == "p2p"} == {808960}


def test_cli_dry_run_table_and_bad_option(capsys):
    assert main(["proxy", "dlrm", "--data", "4", "--dry-run"]) == 0
    assert "embedding all-to-all (forward)" in capsys.readouterr().out
    assert main(["proxy", "dlrm", "--data", "8", "--dry-run"]) == 2
    assert "--data 8" in capsys.readouterr().err
