"""Damaged checkpoints: every file is verified on load, and each kind of damage is a
CheckpointError naming the file and the last good checkpoint — never a raw
BadZipFile/EOFError/JSONDecodeError, never silently accepted. Failed writes (disk
full) keep the previous checkpoint; a killed write's temporary files are cleaned."""
import errno
import json
import os
import shutil

import numpy as np
import pytest

from nntile_lab.train import checkpoint as ck
from nntile_lab.train.checkpoint import CheckpointError, load_checkpoint, read_state

FILES = ("model.npz", "optimizer.npz", "state.json", "manifest.json")


def save(out, step):
    rng = np.random.default_rng(step)   # each step its own values
    model = {"w": rng.standard_normal((64, 32)).astype(np.float32)}
    opt = {"step": step, "m": {"w": rng.standard_normal((64, 32)).astype(np.float32)}}
    return ck.save_checkpoint(out, model, opt, {"step": step, "config": {"n_layer": 1}})


def truncate(p):
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def empty(p):
    p.write_bytes(b"")


def delete(p):
    p.unlink()


def alter(p):   # same size, one byte changed in the middle
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x20
    p.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [truncate, empty, delete, alter])
@pytest.mark.parametrize("name", FILES)
def test_damaged_file_is_named_with_the_last_good_checkpoint(tmp_path, name, damage):
    save(tmp_path, 2)
    shutil.copytree(tmp_path / "checkpoint", tmp_path / "checkpoint.old")  # a good older one
    damage(tmp_path / "checkpoint" / name)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(tmp_path)
    msg = str(err.value)
    assert f"checkpoint {tmp_path / 'checkpoint'} is damaged" in msg
    assert str(tmp_path / "checkpoint" / name) in msg or (
        name == "manifest.json" and "manifest.json" in msg), msg
    assert f"the last good checkpoint is {tmp_path / 'checkpoint.old'} (step 2)" in msg
    # without a good one, the message says so
    shutil.rmtree(tmp_path / "checkpoint.old")
    with pytest.raises(CheckpointError, match="no intact checkpoint is left"):
        load_checkpoint(tmp_path)


@pytest.mark.parametrize("damage", [truncate, empty, alter])
def test_read_state_verifies_state_json(tmp_path, damage):
    save(tmp_path, 1)
    damage(tmp_path / "checkpoint" / "state.json")
    with pytest.raises(CheckpointError, match=r"state.json (has|does not match|is unread)"):
        read_state(tmp_path)


def test_disk_full_names_the_file_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    save(tmp_path, 1)
    real = ck._write_npz

    def full(path, arrays):
        if path.name == "optimizer.npz":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(path, arrays)

    monkeypatch.setattr(ck, "_write_npz", full)
    with pytest.raises(CheckpointError, match=r"could not write checkpoint file .*optimizer"
                       r"\.npz: No space left on device; the previous checkpoint .*checkpoint "
                       r"is intact"):
        save(tmp_path, 2)
    monkeypatch.undo()
    assert load_checkpoint(tmp_path).state["step"] == 1
    assert sorted(os.listdir(tmp_path)) == ["checkpoint"]   # the temporary dir is gone


def test_killed_write_leftovers_are_cleaned_by_the_next_save(tmp_path):
    save(tmp_path, 1)
    for k in range(3):   # what kill -9 during writes leaves behind
        d = tmp_path / f".checkpoint.x{k}.tmp"
        d.mkdir()
        (d / "model.npz").write_bytes(b"\0" * 1000)
    (tmp_path / ".log.csv.abc.tmp").write_text("partial")
    removed = ck.clean_stale(tmp_path)
    assert len(removed) == 4 and sorted(os.listdir(tmp_path)) == ["checkpoint"]
    (tmp_path / ".checkpoint.y.tmp").mkdir()
    save(tmp_path, 2)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint"]


def test_checkpoint_old_goes_only_when_the_new_checkpoint_is_whole(tmp_path):
    """kill -9 after the second rename leaves checkpoint.old beside a whole checkpoint:
    the next run removes it. Beside a damaged checkpoint it is the last good one: kept."""
    save(tmp_path, 1)
    shutil.copytree(tmp_path / "checkpoint", tmp_path / "checkpoint.old")
    save_dir = tmp_path / "checkpoint"
    assert ck.clean_stale(tmp_path) == [tmp_path / "checkpoint.old"]
    assert sorted(os.listdir(tmp_path)) == ["checkpoint"]
    shutil.copytree(save_dir, tmp_path / "checkpoint.old")
    alter(save_dir / "model.npz")
    assert ck.clean_stale(tmp_path) == []
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "checkpoint.old"]


def test_format_1_checkpoints_still_load_unverified(tmp_path):
    path = save(tmp_path, 1)
    (path / "manifest.json").unlink()
    state = json.loads((path / "state.json").read_text())
    (path / "state.json").write_text(json.dumps({**state, "format": 1}))
    with pytest.warns(UserWarning, match="cannot be verified"):
        assert load_checkpoint(tmp_path).state["step"] == 1
    empty(path / "model.npz")     # still a clear error, not a BadZipFile
    with pytest.warns(UserWarning), pytest.raises(CheckpointError, match="model.npz cannot "
                                                  "be read"):
        load_checkpoint(tmp_path)


def test_out_dir_that_is_a_file_is_a_clear_error(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(CheckpointError, match="it is a file, not a directory"):
        save(f, 1)


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_corrupt_model_file_is_a_clear_error(tmp_path, suffix):
    from nntile_lab.nn import load_checkpoint_file
    path = tmp_path / f"model{suffix}"
    path.write_bytes(b"\x00garbage, not a model file" * 10)
    with pytest.raises(ValueError, match=rf"model\{suffix}' is not a readable .*corrupt"):
        load_checkpoint_file(path)


def test_ctrl_c_during_a_save_lands_after_it(tmp_path, monkeypatch):
    """SIGINT in the middle of writing: the save completes, then KeyboardInterrupt."""
    import signal
    save(tmp_path, 1)
    real = ck._write_npz

    def interrupted(path, arrays):
        real(path, arrays)
        if path.name == "model.npz":
            signal.raise_signal(signal.SIGINT)   # as if Ctrl-C were pressed now

    monkeypatch.setattr(ck, "_write_npz", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save(tmp_path, 2)
    assert load_checkpoint(tmp_path).state["step"] == 2   # whole and verified
    assert sorted(os.listdir(tmp_path)) == ["checkpoint"]


def test_an_altered_digest_in_the_manifest_names_the_manifest(tmp_path):
    """One changed character of a file's SHA-256 in manifest.json blamed that file (the
    altered byte of the test above fell there once its values stopped depending on the
    tests that ran before): the manifest's own checksum names the manifest."""
    save(tmp_path, 2)
    path = tmp_path / "checkpoint" / "manifest.json"
    manifest = json.loads(path.read_text())
    digest = manifest["files"]["optimizer.npz"]["sha256"]
    manifest["files"]["optimizer.npz"]["sha256"] = ("0" if digest[0] != "0" else "1") + digest[1:]
    path.write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match=r"manifest.json does not match its own checksum"):
        load_checkpoint(tmp_path)
