"""Task priorities from the step's task graph: their order, the tasks they land on, and
results bit-identical with and without them under the priority-aware schedulers."""
import numpy as np
import pytest

import nntile_lab as nl
from nntile_lab.nn import priorities
from nntile_lab.optim import AdamW
from nntile_lab.spec import ExperimentSpec
from nntile_lab.trace import Trace

CFG = dict(n_layer=3, n_head=2, n_embd=16, vocab_size=37, n_positions=8, batch_tile=2,
           seq_tile=4, embd_tile=8, inner_tile=16, head_tile=1, vocab_tile=16)


@pytest.mark.parametrize("n_layer", [1, 4, 12])
def test_bottom_level_order(n_layer):
    """gradient norm > forward 0 > … > forward L > backward L > … > backward 0 > zero-fill
    > dW > optimizer."""
    chain = ([priorities.grad_norm(n_layer)]
             + [priorities.forward(i, n_layer) for i in range(n_layer + 1)]
             + [priorities.backward(i, n_layer) for i in reversed(range(n_layer + 1))]
             + [priorities.ZERO_GRAD, priorities.WEIGHT_GRAD, priorities.OPTIMIZER])
    assert all(a == b + 1 for a, b in zip(chain, chain[1:]))
    assert chain[-1] == 0
    with pytest.raises(ValueError, match=f"layer={n_layer + 1} must be from 0 to n_layer"):
        priorities.forward(n_layer + 1, n_layer)


def _train(scheduler, prio, steps=3, trace=False):
    """Losses, final parameters and (with ``trace``) the last step's task table."""
    cfg = nl.GPT2Config(**CFG)
    rng = np.random.default_rng(5)
    batches = [rng.integers(0, cfg.vocab_size, (4, 9)) for _ in range(steps)]
    with nl.Runtime(scheduler=scheduler, ncpu=2, priorities=prio, profiling=trace) as rt:
        model = nl.GPT2(cfg, seed=1)
        opt = AdamW(model, lr=1e-2)
        losses, tasks = [], None
        for k, b in enumerate(batches):
            tr = Trace(rt).start() if trace and k == steps - 1 else None
            losses.append(model.forward_backward(b[:, :-1], b[:, 1:]))
            opt.step(clip_norm=1.0)
            rt.wait()
            if tr is not None:
                tr.stop()
                tasks = tr.tasks
        params = {n: p.to_numpy() for n, p in model.params.items()}
    return losses, params, tasks


@pytest.mark.parametrize("scheduler", ["lws", "dmdas", "prio"])
def test_bit_identical_with_and_without_priorities(scheduler):
    base_losses, base_params, _ = _train("eager", False)
    losses, params, _ = _train(scheduler, True)
    assert losses == base_losses               # exact: priorities only reorder
    assert base_losses[-1] < base_losses[0]    # and it trained
    for n, p in base_params.items():
        assert np.array_equal(params[n], p), n


def test_tasks_carry_their_stage_priority():
    *_, t = _train("lws", True, steps=1, trace=True)
    L = CFG["n_layer"]
    gemm = t[t["name"] == "gemm"]
    fwd = gemm[gemm["phase"] == "forward"]
    for layer in range(L + 1):
        assert set(fwd[fwd["layer"] == layer]["priority"]) == {priorities.forward(layer, L)}
    bwd = gemm[gemm["phase"] == "backward"]
    # each block's backward: dx gemms at the stage's priority, dW gemms (beta=1
    # accumulations into the gradients) at WEIGHT_GRAD
    for layer in range(L):
        got = set(bwd[bwd["layer"] == layer]["priority"])
        assert got == {priorities.backward(layer, L), priorities.WEIGHT_GRAD}, layer
    fills = t[t["name"].isin(["fill", "fill_after"]) & (t["phase"] == "backward")]
    assert len(fills)   # the gradients' zero fills (drop_grads: each before its block)
    assert set(fills["priority"]) == {priorities.ZERO_GRAD}
    assert set(t[t["name"] == "embedding_backward"]["priority"]) == {priorities.WEIGHT_GRAD}
    opt = t[t["phase"] == "optimizer"]
    norm = opt["name"] == "sumsq_all"
    assert set(opt[~norm]["priority"]) == {priorities.OPTIMIZER}
    assert set(opt[norm]["priority"]) == {priorities.grad_norm(L)}
    *_, off = _train("lws", False, steps=1, trace=True)
    assert (off["priority"] == 0).all() and len(off) == len(t)


def test_gradient_norm_chain_follows_the_backward_at_the_top_priority(monkeypatch):
    """The norm's chain reads the gradients in the order the backward finishes them (last
    layers first, the embeddings last) and is submitted at the model's highest priority,
    so it runs during the backward instead of as a serial tail after it (the old parameter
    order started with the embedding's gradient, finished last). Whether it overlaps in
    time depends on the machine's timing: BENCHMARKS.md measures the tail."""
    from nntile_lab import optim
    seen = []
    real = optim.ops.sumsq_all

    def spy(g, **kw):
        seen.append((id(g), nl.Runtime.active._scope[0]))
        return real(g, **kw)
    monkeypatch.setattr(optim.ops, "sumsq_all", spy)
    cfg = nl.GPT2Config(**CFG)
    tokens = np.random.default_rng(5).integers(0, cfg.vocab_size, (4, 9))
    with nl.Runtime(scheduler="lws", ncpu=2, priorities=True):
        model = nl.GPT2(cfg, seed=1)
        model.forward_backward(tokens[:, :-1], tokens[:, 1:])
        AdamW(model, lr=1e-2).step(clip_norm=1.0)
        names = {id(g): n for n, g in model.grads.items()}
        assert [names[i] for i, _ in seen] == list(reversed(list(model.grads)))
        assert {p for _, p in seen} == {model.grad_norm_priority}
        assert model.grad_norm_priority > max(priorities.forward(i, cfg.n_layer)
                                              for i in range(cfg.n_layer + 1))


def test_priorities_are_on_by_default_under_every_policy():
    # heteroprio too: its buckets take the priority as a level (kernels/runtime/heteroprio.c)
    for sched in ("heteroprio", "lws", "dmdas", "eager"):
        with nl.Runtime(scheduler=sched, ncpu=1) as rt:
            assert rt.priorities
    with nl.Runtime(scheduler="heteroprio", ncpu=1, priorities=False) as rt:
        assert not rt.priorities


def test_spec_switch_reaches_the_runtime():
    assert "priorities" not in ExperimentSpec().runtime_kwargs()
    kw = ExperimentSpec(priorities=True, scheduler="dmdasd").runtime_kwargs()
    assert kw["priorities"] is True
    with nl.Runtime(**kw) as rt:
        assert rt.priorities and rt.scheduler == "dmdasd"
