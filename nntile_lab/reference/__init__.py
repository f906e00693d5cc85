"""Reference implementations (PyTorch) that the tiled model is checked against.

Nothing here is needed to train: ``torch_gpt2`` imports torch, so only tests and benchmarks
import it, and this package deliberately re-exports nothing.
"""
