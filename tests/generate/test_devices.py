"""Generation off the beaten path: every task of a generation on the OpenCL worker gives the
CPU's tokens (GPT-2, and a Llama: rotary positions, grouped-query heads); a model whose
weights exceed StarPU's RAM cap generates from a disk node the in-memory run's tokens, its
tiles streamed from disk and back."""
import numpy as np
import pytest

import nntile_lab as nl
from nntile_lab.nn.config import GPT2Config
from nntile_lab.reference import hf_generate as hf
from tests.conftest import need_opencl
from tests.generate.test_models import agree_until_tie, wide_llama, wide_state


def _generate(cfg, state, prompts, n, where=None, **rt_kw):
    """Greedy tokens of ``prompts`` in a runtime of ``rt_kw`` (every task confined to
    ``where`` workers if given), and the disk traffic of the generation out of core."""
    with nl.Runtime(**rt_kw) as rt:
        model = (nl.Llama if isinstance(cfg, nl.LlamaConfig) else nl.GPT2)(cfg)
        model.load_state_dict(state)
        if rt_kw.get("ooc_dir"):
            rt.wait()
            rt.disk_traffic(reset=True)
        if where:
            with rt.on(where):
                g = model.generate(prompts, n, greedy=True, cache_tile=8)
        else:
            g = model.generate(prompts, n, greedy=True, cache_tile=8)
        traffic = rt.disk_traffic() if rt_kw.get("ooc_dir") else None
        # freed just before the runtime stops: out of core, stop() waits for the tiles'
        # transfers (it aborted in StarPU once: kernels/runtime/tiles.c)
        model.free()
    return g.tokens, traffic


def test_generation_on_the_opencl_worker_gives_the_cpus_tokens():
    need_opencl()
    cfg = GPT2Config(n_layer=2, n_head=4, n_embd=32, n_positions=24, vocab_size=300,
                     head_tile=2, embd_tile=16, inner_tile=48, vocab_tile=128, seq_tile=4)
    state = wide_state(cfg, 3)
    rng = np.random.default_rng(3)
    prompts = [rng.integers(0, 300, n).tolist() for n in (3, 9)]
    cpu, _ = _generate(cfg, state, prompts, 10, ncpu=1)
    ocl, _ = _generate(cfg, state, prompts, 10, ncpu=1, nopencl=1, scheduler="dmda",
                       where="opencl")
    reference = hf.gpt2_model(cfg, state)
    for p, a, b in zip(prompts, cpu, ocl):
        assert agree_until_tie(b, a, reference, p)


def test_llama_on_the_opencl_worker_gives_the_cpus_tokens():
    """Rotary positions at the cache's columns and grouped-query heads (2 query heads per
    cache head) on the OpenCL worker."""
    need_opencl()
    cfg = nl.LlamaConfig(n_layer=2, n_head=4, n_kv_head=2, n_embd=32, n_inner=40,
                         vocab_size=300, n_positions=24, head_tile=2, embd_tile=16,
                         inner_tile=24, vocab_tile=128, seq_tile=4)
    with nl.Runtime(ncpu=1):
        model, state = wide_llama(cfg, 3)
        model.free()
    rng = np.random.default_rng(3)
    prompts = [rng.integers(0, 300, n).tolist() for n in (3, 9)]
    cpu, _ = _generate(cfg, state, prompts, 10, ncpu=1)
    ocl, _ = _generate(cfg, state, prompts, 10, ncpu=1, nopencl=1, scheduler="dmda",
                       where="opencl")
    reference = hf.llama_model(cfg, state)
    for p, a, b in zip(prompts, cpu, ocl):
        assert agree_until_tie(b, a, reference, p)


def test_weights_over_the_ram_cap_generate_from_disk(tmp_path):
    # 2 layers, n_embd 256, vocabulary 16384: 22 MiB of weights against a 16 MiB cap
    cfg = GPT2Config(n_layer=2, n_head=4, n_embd=256, n_positions=32, vocab_size=16384,
                     head_tile=2, inner_tile=256, vocab_tile=2048)
    weights_mb = 4 * cfg.num_params(with_positions=True) / 2**20
    assert weights_mb > 20
    state = wide_state(cfg, 4)
    prompts = [[1, 2, 3, 4, 5], [6, 7]]
    ram, _ = _generate(cfg, state, prompts, 6, ncpu=1, scheduler="eager")
    disk, traffic = _generate(cfg, state, prompts, 6, ncpu=1, scheduler="eager",
                              memory_limit_mb=16, ooc_dir=str(tmp_path), ooc_size_mb=256)
    assert disk == ram                          # one worker: the same sums, the same tokens
    # every decode step reads the weights: most of them come back from disk each time
    assert traffic["bytes_read"] > 5 * (weights_mb - 16) * 2**20, traffic


@pytest.mark.parametrize("where", ["cpu"])
def test_generation_confined_to_the_cpu_workers_runs(where):
    """Runtime.on('cpu') with an OpenCL worker present: nothing of generation needs it."""
    need_opencl()
    cfg = GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=16, vocab_size=64)
    state = wide_state(cfg, 5)
    a, _ = _generate(cfg, state, [[1, 2]], 4, ncpu=1)
    b, _ = _generate(cfg, state, [[1, 2]], 4, ncpu=1, nopencl=1, where=where)
    assert a == b
