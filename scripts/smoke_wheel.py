"""Smoke test of an installed nntile_lab (CI runs it in a fresh venv outside the checkout):
the runtime starts, a tiled gemm matches numpy, two GPT-2 training steps lower the loss."""
import os
import sys

import numpy as np

import nntile_lab as nl
from nntile_lab import _lib

checkout = os.environ.get("NNTILE_LAB_CHECKOUT")
if checkout and os.path.realpath(nl.__file__).startswith(os.path.realpath(checkout) + os.sep):
    sys.exit(f"smoke: imported nntile_lab from the checkout ({nl.__file__}), not the wheel")

print(f"smoke: nntile_lab {nl.__version__} from {os.path.dirname(nl.__file__)}, "
      f"kernels variant {_lib.VARIANT} ({_lib.ffi.string(_lib.lib.nl_build_cflags()).decode()})")
rt = nl.Runtime(scheduler="dmda", ncpu=2)
rng = np.random.default_rng(0)
a = rng.standard_normal((300, 200)).astype(np.float32)
b = rng.standard_normal((200, 150)).astype(np.float32)
c = nl.ops.gemm(nl.from_numpy(a, tile_shape=(128, 64)), nl.from_numpy(b, tile_shape=(64, 96)))
err = float(np.abs(c.to_numpy() - a @ b).max() / np.abs(a @ b).max())
assert err < 1e-5, f"tiled gemm differs from numpy: relative error {err:.2e}"
print(f"smoke: tiled gemm 300x200x150 matches numpy (relative error {err:.1e})")

cfg = nl.GPT2Config(n_layer=2, n_head=2, n_embd=64, n_positions=32, vocab_size=1024,
                    batch_tile=2, vocab_tile=512, head_tile=1)
model = nl.GPT2(cfg, seed=0)
opt = nl.optim.AdamW(model, lr=3e-3)
ids = rng.integers(0, cfg.vocab_size, (4, 33))
losses = []
for _ in range(2):   # the same batch twice: the second loss must be lower
    losses.append(model.forward_backward(ids[:, :-1], ids[:, 1:]))
    opt.step(clip_norm=1.0)
assert all(np.isfinite(losses)) and losses[1] < losses[0], f"losses {losses}"
print(f"smoke: two GPT-2 steps, loss {losses[0]:.4f} -> {losses[1]:.4f}")
rt.stop()
print("smoke: ok")
