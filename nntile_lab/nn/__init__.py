"""Models on tiled tensors."""
from nntile_lab.nn.config import GPT2Config
from nntile_lab.nn.gpt2 import GPT2
from nntile_lab.nn.state import load_checkpoint_file

__all__ = ["GPT2", "GPT2Config", "load_checkpoint_file"]
