"""The trainer's model/optimizer interface around the PyTorch reference GPT-2.

Lets the training loop, checkpoints and CLI be tested without the tiled model: anything
the trainer does to ``TorchModel``/``TorchAdamW`` it does to ``nntile_lab.nn.GPT2`` and
``nntile_lab.optim`` through the same methods.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from nntile_lab.data.bins import write_tokens
from nntile_lab.nn.config import GPT2Config
from nntile_lab.reference.torch_gpt2 import TorchGPT2


@dataclass
class TinyConfig:
    n_layer: int = 1
    n_head: int = 2
    n_embd: int = 32
    n_positions: int = 16
    vocab_size: int = 64
    n_inner: int | None = None
    layer_norm_epsilon: float = 1e-5
    embd_tile: int = 32


class TorchModel:
    def __init__(self, config: TinyConfig, seed: int = 0):
        self.config = config
        self.net = TorchGPT2(config, seed=seed)

    def forward_backward(self, input_ids, labels, *, accumulate=False, grad_scale=1.0):
        return self.net.forward_backward(input_ids, labels, accumulate=accumulate,
                                         grad_scale=grad_scale)

    def loss(self, input_ids, labels):
        return self.net.loss(input_ids, labels)

    def state_dict(self):
        return self.net.numpy_state_dict()

    def load_state_dict(self, state):
        self.net.load_numpy_state_dict(state)

    def flops_per_token(self, seq_len):
        fields = ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size", "n_inner")
        return GPT2Config(**{f: getattr(self.config, f) for f in fields}).flops_per_token(
            seq_len)


class TorchAdamW:
    """torch AdamW with the step(lr, clip_norm) interface; state as nested numpy dicts."""

    def __init__(self, model: TorchModel, lr=1e-3, weight_decay=0.1):
        self.lr = lr
        self.named = dict(model.net.named_parameters())
        self.opt = torch.optim.AdamW(self.named.values(), lr=lr, betas=(0.9, 0.95),
                                     weight_decay=weight_decay)

    def step(self, lr, clip_norm):
        params = list(self.named.values())
        norm = torch.nn.utils.clip_grad_norm_(params, clip_norm or float("inf"))
        for g in self.opt.param_groups:
            g["lr"] = lr
        self.opt.step()
        return float(norm)

    def state_dict(self):
        state = [self.opt.state[p] for p in self.named.values()]
        if not state[0]:
            return {"step": 0, "betas": [0.9, 0.95]}
        return {"step": int(state[0]["step"]), "betas": (0.9, 0.95),
                "exp_avg": {k: s["exp_avg"].numpy().copy() for k, s in zip(self.named, state)},
                "exp_avg_sq": {k: s["exp_avg_sq"].numpy().copy()
                               for k, s in zip(self.named, state)}}

    def load_state_dict(self, d):
        if d["step"] == 0:
            return
        for k, p in self.named.items():
            self.opt.state[p] = {"step": torch.tensor(float(d["step"])),
                                 "exp_avg": torch.from_numpy(np.array(d["exp_avg"][k])),
                                 "exp_avg_sq": torch.from_numpy(np.array(d["exp_avg_sq"][k]))}


def tiny_dataset(path, vocab=64, n_train=4000, n_val=600, seed=0):
    """A learnable stream: mostly t[i+1] = (5·t[i] + 1) mod vocab, with 10% random tokens."""
    rng = np.random.default_rng(seed)
    tokens = np.empty(n_train + n_val, np.int64)
    tokens[0] = 0
    for i in range(1, len(tokens)):
        tokens[i] = (5 * tokens[i - 1] + 1) % vocab
        if rng.random() < 0.1:
            tokens[i] = rng.integers(vocab)
    write_tokens(path / "train.bin", tokens[:n_train])
    write_tokens(path / "val.bin", tokens[n_train:])
    return path
