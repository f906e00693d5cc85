"""Checkpoints: exact round trips, atomic replacement, crash leftovers, clear errors."""
import json
import os

import numpy as np
import pytest

from nntile_lab.train import checkpoint as ck
from nntile_lab.train.checkpoint import (
    check_config,
    find_checkpoint,
    load_checkpoint,
    save_checkpoint,
)

MODEL = {"transformer.wte.weight": np.random.default_rng(0).standard_normal((5, 3)).astype(
    np.float32),
         "transformer.ln_f.bias": np.zeros(3, np.float32)}


def optimizer_state(step):
    return {"step": np.int64(step), "betas": (0.9, 0.95), "amsgrad": False, "note": None,
            "m": {"w": np.random.default_rng(step).standard_normal(4),
                  "scalar": np.array(2.5, np.float32)},
            "list": [np.arange(3), 1.5]}


def save(out, step):
    return save_checkpoint(out, MODEL, optimizer_state(step),
                           {"step": step, "config": {"n_layer": 1}})


def test_round_trip_is_exact(tmp_path):
    opt = optimizer_state(3)
    path = save_checkpoint(tmp_path, MODEL, opt, {"step": 3, "rng": {"state": 2**127 + 1}})
    assert path == tmp_path / "checkpoint"
    assert sorted(os.listdir(tmp_path)) == ["checkpoint"]  # no temporary directory left
    assert sorted(os.listdir(path)) == ["manifest.json", "model.npz", "optimizer.npz",
                                        "state.json"]
    got = load_checkpoint(tmp_path)
    assert got.path == path
    assert got.model_state.keys() == MODEL.keys()
    for k, v in MODEL.items():
        assert got.model_state[k].dtype == v.dtype and np.array_equal(got.model_state[k], v)
    o = got.optimizer_state
    assert o["step"] == 3 and isinstance(o["step"], int)
    assert o["betas"] == [0.9, 0.95] and o["amsgrad"] is False and o["note"] is None
    assert np.array_equal(o["m"]["w"], opt["m"]["w"])
    assert o["m"]["scalar"].dtype == np.float32 and o["m"]["scalar"] == 2.5
    assert np.array_equal(o["list"][0], np.arange(3)) and o["list"][1] == 1.5
    assert got.state == {"step": 3, "rng": {"state": 2**127 + 1}, "format": 2}


def test_new_save_replaces_old(tmp_path):
    save(tmp_path, 1)
    save(tmp_path, 2)
    assert load_checkpoint(tmp_path).state["step"] == 2
    assert sorted(os.listdir(tmp_path)) == ["checkpoint"]


def test_unsavable_state_keeps_old_checkpoint(tmp_path):
    save(tmp_path, 1)
    with pytest.raises(TypeError, match=r"optimizer state m\.w: cannot save a object"):
        save_checkpoint(tmp_path, MODEL, {"m": {"w": object()}}, {"step": 2})
    with pytest.raises(TypeError, match=r"optimizer state state: dict keys must be strings"):
        save_checkpoint(tmp_path, MODEL, {"state": {0: np.ones(2)}}, {"step": 2})
    assert load_checkpoint(tmp_path).state["step"] == 1
    assert sorted(os.listdir(tmp_path)) == ["checkpoint"]


def test_failed_rename_restores_old_checkpoint(tmp_path, monkeypatch):
    save(tmp_path, 1)
    real = os.replace

    def flaky(src, dst):
        if str(src).endswith(".tmp") and str(dst).endswith("checkpoint"):
            raise OSError("disk gone")
        real(src, dst)

    monkeypatch.setattr(ck.os, "replace", flaky)
    with pytest.raises(ck.CheckpointError,
                       match="disk gone; the previous checkpoint .* is intact"):
        save(tmp_path, 2)
    monkeypatch.undo()
    assert load_checkpoint(tmp_path).state["step"] == 1
    assert sorted(os.listdir(tmp_path)) == ["checkpoint"]


def test_crash_between_renames_is_found(tmp_path):
    save(tmp_path, 1)
    os.replace(tmp_path / "checkpoint", tmp_path / "checkpoint.old")
    assert find_checkpoint(tmp_path) == tmp_path / "checkpoint.old"
    assert load_checkpoint(tmp_path).state["step"] == 1
    save(tmp_path, 2)  # the next save cleans the leftover up
    assert sorted(os.listdir(tmp_path)) == ["checkpoint"]
    assert load_checkpoint(tmp_path).state["step"] == 2


def test_find_accepts_checkpoint_dir_and_names_missing_path(tmp_path):
    path = save(tmp_path / "run", 1)
    assert find_checkpoint(path) == path
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        load_checkpoint(missing)


def test_unknown_format_is_rejected(tmp_path):
    path = save(tmp_path, 1)
    state = json.loads((path / "state.json").read_text())
    (path / "state.json").write_text(json.dumps({**state, "format": 99}))
    manifest = json.loads((path / "manifest.json").read_text())   # as a future version would
    manifest["files"]["state.json"] = ck._digest(path / "state.json")
    manifest["sha256"] = ck._files_digest(manifest["files"])
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="format 99"):
        load_checkpoint(tmp_path)


def test_check_config_names_differences_but_ignores_tiles():
    saved = {"n_layer": 2, "n_embd": 32, "vocab_size": 64, "embd_tile": 16, "n_inner": None}
    check_config(saved, {**saved, "embd_tile": 8, "seq_tile": 4}, "ck")
    with pytest.raises(ValueError, match=r"checkpoint ck .*n_embd: checkpoint 32 vs model 64"
                                         r".*vocab_size: checkpoint 64 vs model 50"):
        check_config(saved, {**saved, "n_embd": 64, "vocab_size": 50}, "ck")
    with pytest.raises(ValueError, match="n_head: checkpoint '<absent>' vs model 2"):
        check_config(saved, {**saved, "n_head": 2}, "ck")
