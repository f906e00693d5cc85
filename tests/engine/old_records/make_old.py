"""How sweep_cache/ was made, with the code of main at 9832d2a (it no longer runs: the
engine replaced sweep.run's cache and NNTILE_LAB_SWEEP_FAULT). Kept as the record of how."""
import os
import sys
from pathlib import Path

from nntile_lab import sweep
from nntile_lab.spec import ExperimentSpec

OUT = Path(sys.argv[1])
BASE = ExperimentSpec(n_layer=1, n_head=2, n_embd=16, vocab_size=64, seq_len=8, batch=2,
                      warmup_steps=1, measure_steps=2, ncpu=2)
pts = sweep.grid(BASE, vocab_tile=[32, 64])
df = sweep.run(pts, OUT / "sweep_cache", isolate=False, keep_traces=False, peak_gflops=100.0,
               progress=False)
os.environ["NNTILE_LAB_SWEEP_FAULT"] = "abort"
df2 = sweep.run([BASE.replace(vocab_tile=16)], OUT / "sweep_cache", isolate=True,
                keep_traces=False, peak_gflops=100.0, progress=False)
del os.environ["NNTILE_LAB_SWEEP_FAULT"]
print(df[["vocab_tile", "gflops", "tasks_per_step", "error"]])
print(df2[["error"]])
