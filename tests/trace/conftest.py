"""A traced stand-in training run shared by the figure, export and CLI tests: two
steps of a tiny GPT-2 (forward, backward, AdamW) under a Trace. The trace is plain
tables once stopped, so it outlives its runtime and the module-scoped ``rt``."""
import numpy as np
import pytest

import nntile_lab as nl
from nntile_lab.optim import AdamW
from nntile_lab.trace import Trace

CONFIG = nl.GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=8, vocab_size=50,
                       seq_tile=4)


def traced_gpt2(steps: int = 2, batch: int = 2):
    """(stopped trace, memory by category, tokens per step) like run_for_trace."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, CONFIG.vocab_size, (batch, CONFIG.n_positions))
    labels = rng.integers(0, CONFIG.vocab_size, (batch, CONFIG.n_positions))
    with nl.Runtime(scheduler="lws", ncpu=2, profiling=True) as rt:
        model = nl.GPT2(CONFIG, seed=0)
        opt = AdamW(model)
        with Trace(rt) as tr:
            for _ in range(steps):
                model.forward_backward(ids, labels)
                with rt.scope(phase="optimizer"):
                    opt.step()
                rt.wait()
                tr.mark_step(tokens=ids.size)
            memory = tr.memory_by_category(model, opt)
    return tr, memory, ids.size


@pytest.fixture(scope="session")
def gpt2_trace():
    if nl.Runtime.active is not None:
        pytest.skip("a runtime is running; the stand-in needs its own")
    return traced_gpt2()
