"""PyTorch bf16 autocast as the references run it (``reference.autocast``): the bf16
forward really runs in bf16 (it differs from fp32 by bf16 rounding, not by more), both
references agree under it, and a precision PyTorch's peers do not run is refused."""
import numpy as np
import pytest

from tests.conftest import require

torch = require("torch")

from nntile_lab.nn.config import GPT2Config  # noqa: E402
from nntile_lab.reference.autocast import autocast, peer_precision  # noqa: E402
from nntile_lab.reference.nanogpt import NanoGPT  # noqa: E402
from nntile_lab.reference.torch_gpt2 import TorchGPT2  # noqa: E402

CFG = GPT2Config(n_layer=2, n_head=2, n_embd=64, n_positions=16, vocab_size=97, n_inner=256)


def _rel(a, b) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("model", [TorchGPT2, NanoGPT])
def test_bf16_forward_backward_is_bf16_rounding_away_from_fp64(model):
    rng = np.random.default_rng(3)
    ids, labels = rng.integers(0, CFG.vocab_size, (2, 3, 16))
    ref = model(CFG, dtype=torch.float64, seed=2)
    state = ref.hf_state_dict() if model is NanoGPT else ref.numpy_state_dict()
    loss64 = ref.forward_backward(ids, labels)
    grads64 = ref.hf_grad_state_dict() if model is NanoGPT else ref.numpy_grad_state_dict()
    m = model(CFG, dtype=torch.float32)
    (m.load_hf_state_dict if model is NanoGPT else m.load_numpy_state_dict)(
        {k: v.astype(np.float32) for k, v in state.items()})
    out = {}
    for prec in ("fp32", "bf16"):
        loss = m.forward_backward(ids, labels, precision=prec)
        g = m.hf_grad_state_dict() if model is NanoGPT else m.numpy_grad_state_dict()
        out[prec] = (loss, max(_rel(g[k], grads64[k]) for k in grads64
                               if np.linalg.norm(grads64[k]) > 0))
    # fp32: float32 rounding (~1e-6); bf16: 8-bit mantissas in every GEMM input (2^-8 =
    # 4e-3 per rounding, a few of them along the graph) — so bf16's gradients are measurably
    # off fp32's (autocast is on) and still within a few bf16 roundings (not garbage). (The
    # loss at GPT-2's init is ~log V from tiny logits: bf16 moves it by ~1e-5 only.)
    assert abs(out["fp32"][0] - loss64) < 1e-5 * loss64
    assert out["fp32"][1] < 1e-4
    assert abs(out["bf16"][0] - loss64) < 2e-2 * loss64
    assert 1e-3 < out["bf16"][1] < 0.1, out
    # parameters and their gradients stay float32 under autocast (mixed precision)
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32
               for p in m.parameters())


def test_autocast_names_and_peers():
    with autocast("bf16"):
        assert (torch.ones(4, 4) @ torch.ones(4, 4)).dtype == torch.bfloat16
    with autocast("fp32"):
        assert (torch.ones(4, 4) @ torch.ones(4, 4)).dtype == torch.float32
    # fp32 leaves a caller's own autocast on (the forward then runs in bf16)
    m = TorchGPT2(CFG, dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16), autocast("fp32"):
        assert m(np.zeros((1, 4), dtype=np.int64)).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="fp16.*fp32 or bf16"):
        autocast("fp16")
    assert [peer_precision(p) for p in ("fp32", "bf16", "bf16-storage")] == [
        "fp32", "bf16", "fp32"]
    with pytest.raises(ValueError, match="auto"):
        peer_precision("auto")
