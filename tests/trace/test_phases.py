"""``trace.phases``: a step cut into forward+backward, gradient-norm tail and optimizer,
on a hand-made trace (every number known) and on a real traced GPT-2."""
import types

import pandas as pd
import pytest

from nntile_lab.trace.phases import MIX, PARTS, op_mix, phase_split


def fake(tasks, steps):
    """tasks: (name, phase, worker, start_us, end_us); steps: (start_us, end_us)."""
    t = pd.DataFrame(tasks, columns=["name", "phase", "worker", "start_us", "end_us"])
    s = pd.DataFrame([(k, a, b) for k, (a, b) in enumerate(steps)],
                     columns=["step", "start_us", "end_us"])
    return types.SimpleNamespace(tasks=t, steps=s, workers=pd.DataFrame({"worker": [0, 1]}))


def test_parts_cut_at_the_last_backward_and_the_first_update():
    # step 0…100: fwd/bwd to 60 (both workers busy to 50, one to 60); the norm 60…70 on
    # worker 0; the updates 75…100 on both workers
    tr = fake([("gemm", "forward", 0, 0, 30), ("gemm", "forward", 1, 0, 30),
               ("gemm", "backward", 0, 30, 60), ("gemm", "backward", 1, 30, 50),
               ("sumsq_all", "optimizer", 0, 60, 70),
               ("adamw", "optimizer", 0, 75, 100), ("adamw", "optimizer", 1, 80, 100)],
              [(0, 100)])
    got = phase_split(tr)
    assert got["steps"] == 1 and got["step_ms"] == pytest.approx(0.1)
    assert [got[f"{p}_ms"] for p in PARTS] == pytest.approx([0.06, 0.015, 0.025])
    assert [got[f"{p}_share"] for p in PARTS] == pytest.approx([0.6, 0.15, 0.25])
    assert got["fwd_bwd_utilisation"] == pytest.approx((30 + 30 + 30 + 20) / 120)
    assert got["norm_utilisation"] == pytest.approx(10 / 30)
    assert got["optimizer_utilisation"] == pytest.approx((25 + 20) / 50)


def test_two_steps_average_and_a_step_without_updates_is_left_out():
    one = [("gemm", "backward", 0, 0, 40), ("adamw", "optimizer", 1, 50, 100)]
    two = [(n, p, w, a + 100, b + 100) for n, p, w, a, b in one]
    # the third step (200…300) has no optimizer task: it is not a training step here
    tr = fake(one + two + [("gemm", "forward", 0, 200, 300)], [(0, 100), (100, 200),
                                                               (200, 300)])
    got = phase_split(tr)
    assert got["steps"] == 2
    assert [got[f"{p}_ms"] for p in PARTS] == pytest.approx([0.04, 0.01, 0.05])


def test_op_mix_by_where_the_work_is():
    # 2 blocks (layers 0, 1), the head is layer 2; -1: no layer (embeddings, fills)
    t = pd.DataFrame([("gemm", "forward", 0, 40, 4e6), ("gemm", "backward", 1, 20, 1e6),
                      ("layer_norm_tile", "forward", 1, 10, 0), ("gemm", "forward", 2, 10, 4e6),
                      ("cross_entropy_stats", "forward", 2, 5, 0),
                      ("sumsq_all", "optimizer", -1, 5, 0), ("adamw", "optimizer", -1, 5, 0),
                      ("fill", "backward", -1, 5, 0)],
                     columns=["name", "phase", "layer", "duration_us", "flops"])
    got = op_mix(types.SimpleNamespace(tasks=t), n_layer=2)
    assert [got[f"{p}_task_share"] for p in MIX] == pytest.approx([0.6, 0.1, 0.1, 0.05, 0.1, 0.05])
    assert got["block_gemm_gflops"] == pytest.approx(5e6 / 60 / 1e3)
    assert got["head_gemm_gflops"] == pytest.approx(4e6 / 10 / 1e3)


def test_real_step_parts_add_up(gpt2_trace):
    tr, _, _ = gpt2_trace
    got = phase_split(tr)
    assert got["steps"] == len(tr.steps) == 2
    assert sum(got[f"{p}_share"] for p in PARTS) == pytest.approx(1.0)
    assert sum(got[f"{p}_ms"] for p in PARTS) == pytest.approx(got["step_ms"])
    for p in PARTS:
        assert 0 <= got[f"{p}_utilisation"] <= 1
    assert got["fwd_bwd_share"] > got["optimizer_share"] > 0
    mix = op_mix(tr, n_layer=1)
    assert sum(mix[f"{p}_task_share"] for p in MIX) == pytest.approx(1.0)
    assert all(mix[f"{p}_task_share"] > 0 for p in ("block_gemm", "block_other", "head_gemm",
                                                "head_other", "optimizer"))
    assert mix["block_gemm_gflops"] > 0 and mix["head_gemm_gflops"] > 0
