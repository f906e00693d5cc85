"""Derived message sizes against dnn-distributed's hard-coded constants (floats)."""
import pytest

from nntile_lab.proxies import models
from nntile_lab.proxies.program import P2P, Collective, Layout


def test_gpt2_large_gradients_and_p2p():
    # dnn-distributed's gpt-2.cpp: "GPT-2 large, micro-batch 1, seq_length 632", 4 stages
    proxy = models.build("gpt2", "large", seq_len=632, micro_batch=1, pipeline=4, data=2)
    grads = set(proxy.counts("allreduce"))
    assert {64328960, 1310720, 4915200, 1638400, 6553600, 3840, 5120, 1280} == grads
    assert proxy.counts("p2p") == [808960, 808960]           # activations and their gradients
    # one transformer block's 12 gradients, as in its intermediate_layer_grad_sizes
    block = sorted(c for _, c in models.gpt_parameters(models.config("gpt2", "large"))["block"])
    assert block == sorted([1280, 4915200, 1638400, 1280, 6553600, 6553600, 1280, 3840, 1280,
                            1280, 5120, 1280])
    # its MESSAGE_AGGREGATION sizes are per-stage sums with ONE layer per stage
    emb = sum(c for _, c in models.gpt_parameters(models.config("gpt2", "large"))["embedding"])
    assert emb + sum(block) == 85317120 and sum(block) == 19677440


def test_gpt2_stage_bucket_is_the_stage_sum():
    proxy = models.build("gpt2", "large", seq_len=632, pipeline=4, data=2, bucket="stage")
    per_stage = 36 // 4
    block = 19677440
    assert sorted(proxy.counts("allreduce")) == sorted(
        {64328960 + 1310720 + per_stage * block,          # stage 0
         per_stage * block,                               # stages 1, 2
         per_stage * block + 64328960 + 2 * 1280})        # stage 3: ln_f + tied head


def test_gpt3_175b_tensor4():
    proxy = models.build("gpt3", "175b", seq_len=2048, micro_batch=1, tensor=4, pipeline=2,
                         data=2, bucket="layer")
    e = 12288
    assert set(proxy.counts("allreduce", "tensor all-reduce")) == {25165824}
    assert set(proxy.counts("p2p")) == {25165824}
    # DP_ALLREDUCE_SIZE 452984832 = 12·E²/4 counts the layer's weights only; our per-layer
    # bucket also holds its biases and layer norms: c_attn 3E/4, c_fc 4E/4 (sharded),
    # attn/mlp projection biases E each and the two layer norms 4E (replicated)
    biases = 3 * e // 4 + 4 * e // 4 + 2 * e + 4 * e
    layer = [c for c in proxy.counts("allreduce", "bucket of 12")]
    assert set(layer) == {452984832 + biases}
    weights = sum(c for n, c in models.gpt_parameters(models.config("gpt3", "175b"), 4)["block"]
                  if n.endswith("weight") and not n.startswith("ln"))
    assert weights == 452984832


def test_dlrm_reference():
    proxy = models.build("dlrm", "reference", data=4)
    assert set(proxy.counts("allreduce", "bottom")) == {49536}
    assert set(proxy.counts("allreduce", "top")) == {728065}      # 138-512-512-512-256-1
    assert set(proxy.counts("alltoall")) == {262144}             # 2048 × 128 × 1 table per rank


def test_cosmoflow_reference():
    proxy = models.build("cosmoflow", "reference", tensor=4, data=2)
    fwd = proxy.counts("p2p", "(forward)")
    bwd = proxy.counts("p2p", "(backward)")
    # backward halos (output gradient, C_out channels, shard face S × S/2, 1 cell deep) equal
    # cosmoflow.cpp's conv_bwd_halo_sizes exactly
    assert bwd == [131072, 262144, 524288, 1048576]
    # its forward constants {2097152, 1048576, 524288, 262144} are 4× ours: they equal
    # batch·C_in·S²·2 (the whole S×S face, both sides' depth) for each neighbour, while a
    # 2×2-decomposed shard only shares an S × S/2 face, one cell deep, with each neighbour
    assert [4 * c for c in fwd] == [2097152, 1048576, 524288, 262144]
    assert set(proxy.counts("allgather")) == {65536, 256, 128}
    assert set(proxy.counts("reduce_scatter")) == {128, 256, 65536}
    assert proxy.counts("allreduce") == [1050737, 3539456, 884992, 221312, 55360, 3488]


@pytest.mark.parametrize("model", models.MODELS)
def test_every_send_has_a_matching_receive(model):
    lay = {"gpt2": dict(data=2, pipeline=3), "gpt3": dict(tensor=2, pipeline=2, data=2),
           "cosmoflow": dict(tensor=4, data=2), "dlrm": dict(data=2)}[model]
    cfg = {"gpt2": "small", "gpt3": "small"}.get(model)
    proxy = models.build(model, cfg, grad_accum=3 if model.startswith("gpt") else None,
                         **lay)
    sends, recvs = [], []
    collectives = {}
    for r, prog in proxy.programs.items():
        for e in prog:
            if isinstance(e, P2P):
                g = proxy.layout.color(e.group, r)[0]
                me = proxy.layout.group_rank(e.group, r)
                sends += [(e.group, g, me, d, e.tag, e.count) for d in e.sends]
                recvs += [(e.group, g, s, me, e.tag, e.count) for s in e.recvs]
            elif isinstance(e, Collective):
                g = (e.group, proxy.layout.color(e.group, r)[0])
                collectives.setdefault(g, {})[r] = [(c.op, c.count, c.label) for c in prog
                                                    if isinstance(c, Collective)
                                                    and c.group == e.group]
    assert sorted(sends) == sorted(recvs)
    for members in collectives.values():      # one sequence of collectives per group
        assert len({tuple(v) for v in members.values()}) == 1


def test_bad_layouts_name_the_option():
    with pytest.raises(ValueError, match="--pipeline 5"):
        models.build("gpt2", "large", pipeline=5)
    with pytest.raises(ValueError, match="--tensor 3"):
        models.build("cosmoflow", tensor=3)
    with pytest.raises(ValueError, match="--config 'huge'"):
        models.build("gpt2", "huge")
    with pytest.raises(ValueError, match="data=0"):
        Layout(data=0)
    with pytest.raises(ValueError, match="--bucket"):
        models.build("gpt2", "small", data=2, bucket="big")
    with pytest.raises(ValueError, match="--seq-len 2048"):
        models.build("gpt2", "small", seq_len=2048)
