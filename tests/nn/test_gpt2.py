"""The tiled GPT-2 against a PyTorch GPT-2 (float64) with the same weights and batch."""
import dataclasses

import numpy as np
import pytest

import nntile_lab as nl
from nntile_lab.nn.state import init_state_dict
from nntile_lab.optim import AdamW
from tests.conftest import require
from tests.tolerance import rel_err

torch = require("torch")
from nntile_lab.reference.torch_gpt2 import TorchGPT2  # noqa: E402

BASE = nl.GPT2Config(n_layer=1, n_head=4, n_embd=24, n_positions=16, vocab_size=97,
                     n_inner=40)
TILINGS = {
    "whole": {},
    "leftovers": dict(batch_tile=2, seq_tile=5, embd_tile=10, inner_tile=16, head_tile=3,
                      vocab_tile=30),
    "one_head_tiles": dict(batch_tile=1, seq_tile=4, embd_tile=7, inner_tile=9, head_tile=1,
                           vocab_tile=13),
    "size_one": dict(batch_tile=1, seq_tile=1, embd_tile=1, inner_tile=1, head_tile=1,
                     vocab_tile=1),
}


def batch(cfg, B=3, T=13, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, cfg.vocab_size, (B, T + 1))
    return ids[:, :-1], ids[:, 1:]


def torch_reference(cfg, state, ids, labels):
    ref = TorchGPT2(cfg, dtype=torch.float64)
    ref.load_numpy_state_dict(state)
    loss = ref.forward_backward(ids, labels)
    return ref, loss, ref.numpy_grad_state_dict()


# every tiling with 1 and 3 layers, but 1-element tiles only with 1 (~10⁵ tasks at 3)
CASES = [(t, n) for t in TILINGS for n in (1, 3) if (t, n) != ("size_one", 3)]


@pytest.mark.parametrize("tiling, n_layer", CASES)
def test_loss_and_gradients_match_torch(rt, tiling, n_layer):
    cfg = dataclasses.replace(BASE, n_layer=n_layer, **TILINGS[tiling])
    ids, labels = batch(cfg)
    model = nl.GPT2(cfg, seed=1)
    state = model.state_dict()
    assert all(np.array_equal(state[k], v) for k, v in init_state_dict(cfg, 1).items())
    loss = model.forward_backward(ids, labels)
    _, want_loss, want_grads = torch_reference(cfg, state, ids, labels)
    assert abs(loss - want_loss) <= 1e-4 * abs(want_loss)
    grads = model.grad_state_dict()
    assert grads.keys() == want_grads.keys() == state.keys()
    for name, g in grads.items():
        assert g.shape == state[name].shape
        assert rel_err(g, want_grads[name]) <= 1e-4, name
    model.free()


def test_every_tiling_gives_the_same_numbers(rt1):
    ids, labels = batch(BASE, seed=3)
    results = []
    for tiling in ("whole", "leftovers", "one_head_tiles"):
        model = nl.GPT2(dataclasses.replace(BASE, **TILINGS[tiling]), seed=2)
        results.append((model.forward_backward(ids, labels), model.grad_state_dict()))
        model.free()
    for loss, grads in results[1:]:
        assert abs(loss - results[0][0]) <= 1e-5 * results[0][0]
        for k, g in grads.items():
            assert rel_err(g, results[0][1][k]) <= 1e-5, k


def test_gradient_accumulation_and_scale(rt1):
    cfg = dataclasses.replace(BASE, **TILINGS["leftovers"])
    model = nl.GPT2(cfg, seed=4)
    ids, labels = batch(cfg, B=4)
    model.forward_backward(ids, labels)
    full = model.grad_state_dict()
    model.forward_backward(ids[:2], labels[:2], grad_scale=0.5)
    model.forward_backward(ids[2:], labels[2:], grad_scale=0.5, accumulate=True)
    for k, g in model.grad_state_dict().items():
        assert rel_err(g, full[k]) <= 1e-5, k
    model.free()


def test_one_adamw_step_equals_torch(rt1):
    cfg = dataclasses.replace(BASE, n_layer=2, **TILINGS["leftovers"])
    ids, labels = batch(cfg)
    model = nl.GPT2(cfg, seed=5)
    before = model.state_dict()
    model.forward_backward(ids, labels)
    opt = AdamW(model, lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    opt.step(clip_norm=None)
    after = model.state_dict()

    ref, _, _ = torch_reference(cfg, before, ids, labels)
    params = dict(ref.named_parameters())
    decay = [p for n, p in params.items() if p.ndim >= 2]
    no_decay = [p for n, p in params.items() if p.ndim < 2]
    topt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=1e-2, betas=(0.9, 0.95), eps=1e-8)
    topt.step()
    want = ref.numpy_state_dict()
    for k in after:
        assert rel_err(after[k] - before[k], want[k] - before[k]) <= 1e-4, k
    model.free()


@pytest.mark.slow
def test_fifty_steps_track_torch(rt1):
    cfg = dataclasses.replace(BASE, n_layer=2, **TILINGS["one_head_tiles"])
    model = nl.GPT2(cfg, seed=6)
    ref = TorchGPT2(cfg, dtype=torch.float64)
    ref.load_numpy_state_dict(model.state_dict())
    opt = AdamW(model, lr=3e-3, weight_decay=0.0)
    topt = torch.optim.AdamW(ref.parameters(), lr=3e-3, betas=(0.9, 0.95), eps=1e-8,
                             weight_decay=0.0)
    ours, theirs = [], []
    for step in range(50):
        ids, labels = batch(cfg, B=2, T=16, seed=step % 5)
        ours.append(model.forward_backward(ids, labels))
        opt.step(clip_norm=1.0)
        theirs.append(ref.forward_backward(ids, labels))
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
        topt.step()
    ours, theirs = np.array(ours), np.array(theirs)
    assert theirs[-1] < theirs[0] - 0.5, "the reference did not learn: a useless comparison"
    assert np.all(np.abs(ours - theirs) <= 1e-3 * np.abs(theirs)), np.abs(ours - theirs).max()
    model.free()


def test_bad_input_is_a_clear_error(rt1):
    model = nl.GPT2(BASE)
    ids, labels = batch(BASE)
    with pytest.raises(ValueError, match="sequence length 17 exceeds n_positions=16"):
        model.forward_backward(np.zeros((2, 17), np.int64), np.zeros((2, 17), np.int64))
    bad = ids.copy()
    bad[1, 2] = 97
    with pytest.raises(ValueError, match=r"input_ids\[\(1, 2\)\] = 97 .* \[0, 97\)"):
        model.forward_backward(bad, labels)
    with pytest.raises(ValueError, match=r"labels\[\(0, 0\)\] = -1"):
        model.forward_backward(ids, np.full_like(labels, -1))
    with pytest.raises(ValueError, match="2-D integer array"):
        model.loss(ids.astype(np.float32), labels)
    assert np.isfinite(model.loss(ids, labels))       # still usable afterwards
    model.free()


def test_config_errors():
    with pytest.raises(ValueError, match="n_embd=30 is not divisible by n_head=4"):
        nl.GPT2Config(n_embd=30, n_head=4)
    with pytest.raises(ValueError, match="head_tile=5 exceeds n_head=4"):
        nl.GPT2Config(n_embd=32, n_head=4, head_tile=5)
    with pytest.raises(ValueError, match="vocab_tile=0 must be a positive integer"):
        nl.GPT2Config(vocab_tile=0)


def test_state_dict_round_trip_and_wrong_config(rt1, tmp_path):
    from safetensors.numpy import save_file

    from nntile_lab.nn import load_checkpoint_file
    model = nl.GPT2(BASE, seed=7)
    state = model.state_dict()
    assert state["transformer.h.0.attn.c_attn.weight"].shape == (24, 72)
    save_file(state, tmp_path / "model.safetensors")
    torch.save({k: torch.tensor(v) for k, v in state.items()}, tmp_path / "model.bin")
    other = nl.GPT2(BASE, seed=8)
    for f in ("model.safetensors", "model.bin"):
        other.load_state_dict(load_checkpoint_file(tmp_path / f))
        assert all(np.array_equal(other.state_dict()[k], v) for k, v in state.items())
    with pytest.raises(ValueError, match="wte.weight has shape .* different config"):
        nl.GPT2(dataclasses.replace(BASE, vocab_size=50)).load_state_dict(state)
    with pytest.raises(ValueError, match="missing .*transformer.h.1"):
        nl.GPT2(dataclasses.replace(BASE, n_layer=2)).load_state_dict(state)
    with pytest.raises(FileNotFoundError, match="nope.safetensors"):
        load_checkpoint_file(tmp_path / "nope.safetensors")
    model.free()
    other.free()
