"""Every kind of file the toolkit reads, damaged: sweep cache records, trace directories,
figure records (tests/figures/test_no_lost_records.py), checkpoints (also
test_checkpoint_faults.py). A damaged or partial file is named and skipped, re-measured
or refused — never trusted as a result, never a raw TypeError/AttributeError/KeyError."""
from __future__ import annotations

import importlib
import json
import os
import shutil

import numpy as np
import pytest

import nntile_lab as nl
from nntile_lab.engine import Store
from nntile_lab.spec import ExperimentSpec
from nntile_lab.trace import Trace, TraceError

sweep_run = importlib.import_module("nntile_lab.sweep.run")   # the package's `run` is a function
sweep_measure = importlib.import_module("nntile_lab.sweep.measure")

SPEC = ExperimentSpec(n_layer=1, n_head=1, n_embd=64, vocab_size=64, seq_len=16, batch=2,
                      ncpu=1, warmup_steps=0, measure_steps=1)
KEY = sweep_run.sweep_point(SPEC).key()
GOOD = {"gflops": 1.5, "step_time_s": 0.1, "tokens_per_s": 320.0, "peak_gflops": 10.0}


@pytest.fixture
def fake_measure(monkeypatch):
    calls = []

    def measure(spec, peak_gflops=None, trace_dir=None, finished=None):
        calls.append(spec.key())
        return dict(GOOD, peak_gflops=peak_gflops)
    monkeypatch.setattr(sweep_measure, "measure", measure)
    return calls


def sweep(cache_dir):
    return sweep_run.run([SPEC], cache_dir, isolate=False, progress=False, peak_gflops=10.0,
                         keep_traces=False)


def damage_results(rec, kind):
    if kind == "null results":
        rec["results"] = None
    elif kind == "results a list":
        rec["results"] = [1, 2]
    elif kind == "no gflops":
        del rec["results"]["gflops"]
    elif kind == "gflops text":
        rec["results"]["gflops"] = "fast"
    elif kind == "gflops bool":
        rec["results"]["gflops"] = True
    elif kind == "error a number":
        rec["reason"] = 3
    elif kind == "memory not a table":
        rec["results"]["memory_by_category"] = "lots"
    elif kind == "trace_dir a number":
        rec["trace_dir"] = 7
    return rec


KINDS = ["null results", "results a list", "no gflops", "gflops text", "gflops bool",
         "error a number", "memory not a table", "trace_dir a number"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_damaged_cache_record_of_this_code_version_is_measured_again(tmp_path, kind,
                                                                       fake_measure):
    first = sweep(tmp_path)
    assert first.loc[0, "gflops"] == GOOD["gflops"] and fake_measure == [SPEC.key()]
    path = Store(tmp_path).path(KEY)
    path.write_text(json.dumps(damage_results(json.loads(path.read_text()), kind)))
    again = sweep(tmp_path)
    assert len(fake_measure) == 2                       # measured again, not trusted
    assert again.loc[0, "gflops"] == GOOD["gflops"] and not again.loc[0, "cached"]
    msgs = again.attrs["messages"]
    assert any(str(path) in m and "is a damaged record" in m and "runs again" in m
               for m in msgs), msgs
    third = sweep(tmp_path)                              # the fresh record is whole
    assert third.loc[0, "cached"] and len(fake_measure) == 2


@pytest.mark.parametrize("text", ["", "{", "null", "[]", '{"format": 99}'])
def test_an_unreadable_cache_record_is_named_and_measured_again(tmp_path, text, fake_measure):
    path = Store(tmp_path).path(KEY)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    df = sweep(tmp_path)
    assert df.loc[0, "gflops"] == GOOD["gflops"] and fake_measure == [SPEC.key()]
    assert any(str(path) in m for m in df.attrs["messages"])


@pytest.fixture(scope="module")
def saved_trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("trace")
    with nl.Runtime(ncpu=1) as rt:
        a = nl.from_numpy(np.ones((64, 64), np.float32), (16, 16))
        with Trace(rt) as tr:
            nl.ops.gemm(a, a)
            rt.wait()
    tr.save(str(d / "whole"))
    return d / "whole", len(tr.tasks)


def copy(saved, tmp_path):
    dst = tmp_path / "t"
    shutil.copytree(saved, dst)
    return dst


def test_a_whole_trace_loads(saved_trace, tmp_path):
    d, n = saved_trace
    assert len(Trace.load(str(copy(d, tmp_path))).tasks) == n == 64


@pytest.mark.parametrize("cut", ["mid-line", "whole lines", "empty"])
def test_a_tasks_csv_cut_short_is_named_not_shown_as_the_trace(saved_trace, tmp_path, cut):
    d = copy(saved_trace[0], tmp_path)
    path = d / "tasks.csv"
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    path.write_text({"mid-line": "".join(lines[:30]) + lines[30][:17],
                     "whole lines": "".join(lines[:30]), "empty": ""}[cut])
    with pytest.raises(TraceError, match=r"tasks\.csv (has \d+ rows, meta\.json says 64|row)"):
        Trace.load(str(d))


def test_an_old_trace_without_row_counts_still_finds_a_line_cut_short(saved_trace, tmp_path):
    d = copy(saved_trace[0], tmp_path)
    meta = json.loads((d / "meta.json").read_text())
    del meta["rows"]
    (d / "meta.json").write_text(json.dumps(meta))
    assert len(Trace.load(str(d)).tasks) == 64
    lines = (d / "tasks.csv").read_text().splitlines(keepends=True)
    (d / "tasks.csv").write_text("".join(lines[:30]) + lines[30][:17])
    with pytest.raises(TraceError, match=r"tasks\.csv row 31 has no number"):
        Trace.load(str(d))


@pytest.mark.parametrize("damage", ["no meta", "meta not json", "meta a list", "no tasks",
                                    "binary tasks", "no directory", "a file"])
def test_a_damaged_trace_directory_is_named(saved_trace, tmp_path, damage):
    d = copy(saved_trace[0], tmp_path)
    if damage == "no meta":
        os.unlink(d / "meta.json")
    elif damage == "meta not json":
        (d / "meta.json").write_text("{")
    elif damage == "meta a list":
        (d / "meta.json").write_text("[]")
    elif damage == "no tasks":
        os.unlink(d / "tasks.csv")
    elif damage == "binary tasks":
        (d / "tasks.csv").write_bytes(b"\x00\xff" * 100 + b"\n\"unterminated")
    elif damage == "no directory":
        shutil.rmtree(d)
    elif damage == "a file":
        shutil.rmtree(d)
        d.write_text("x")
    with pytest.raises(TraceError, match=str(d)):
        Trace.load(str(d))


def test_a_damaged_schedule_in_a_checkpoint_is_named():
    from nntile_lab.train.resume import resumed_schedule
    from nntile_lab.train.schedule import WarmupCosine
    state = {"step": 3, "settings": {"schedule": {"kind": "WarmupCosine", "lr": "x"}}}
    with pytest.raises(ValueError, match="damaged learning-rate schedule"):
        resumed_schedule(state, "ckpt", WarmupCosine(1e-3, 0, 6), False, 6)
