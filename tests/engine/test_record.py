"""The record every run writes: spec, environment and results (engine.record, engine.facts),
refused with the file's name when it cannot be used."""
import json
import math
import os

import pytest

from nntile_lab.engine import facts, record
from nntile_lab.spec import ExperimentSpec


def test_record_has_spec_environment_and_results(tmp_path):
    s = ExperimentSpec(n_layer=1)
    path = record.save_record(tmp_path / "r" / "rec.json", "test", s,
                              {"gflops": 1.5, "loss": math.nan}, note="x")
    rec = record.read_record(path)
    assert rec["spec"] == s.to_dict() and ExperimentSpec.from_dict(rec["spec"]) == s
    assert rec["results"] == {"gflops": 1.5, "loss": None} and rec["note"] == "x"
    assert rec["kind"] == "test" and rec["schema"] == record.SCHEMA
    m = rec["machine"]
    flags = set(facts.cpuinfo().get("flags", "").split())
    assert m["cores"] == os.cpu_count() and m["memory_gib"] > 0 and m["cpu_model"]
    assert set(m["isa"]) == {f for f in facts.ISA_FLAGS if f in flags}
    v = rec["versions"]
    assert v["starpu"] == facts.starpu_version() and v["numpy"] and v["python"]
    assert any(info["version"] for info in v["blas"].values())
    assert rec["git_commit"] is None or len(rec["git_commit"].split("-")[0]) == 40
    assert not [p for p in os.listdir(path.parent) if p.endswith(".tmp")]


def test_unusable_records_say_why(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(record.RecordError, match="is corrupt.*delete it"):
        record.read_record(bad)
    bad.write_text(json.dumps({"spec": {}, "results": {}}))
    with pytest.raises(record.RecordError, match="format None.*older version"):
        record.read_record(bad)


@pytest.mark.parametrize("vendor, family, number, name", [
    ("AuthenticAMD", 26, 2, "AMD EPYC, family 26 model 2 (Zen 5)"),
    ("AuthenticAMD", 25, 17, "AMD EPYC, family 25 model 17 (Zen 4)"),
    ("AuthenticAMD", 25, 1, "AMD EPYC, family 25 model 1 (Zen 3)"),
    ("GenuineIntel", 6, 143, "AMD EPYC, family 6 model 143"),
    ("AuthenticAMD", None, 2, "AMD EPYC"),
])
def test_cpu_is_named_by_family_and_model(vendor, family, number, name):
    assert facts.cpu_name("AMD EPYC", vendor, family, number) == name
    m = facts.machine()
    assert m["cpu"].startswith(m["cpu_model"])
    if m["cpu_family"] is not None:
        assert f"family {m['cpu_family']} model {m['cpu_model_number']}" in m["cpu"]
