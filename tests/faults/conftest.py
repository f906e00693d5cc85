"""Fixtures of the fault tests: the CLI's PyTorch-adapter build (from the train CLI tests)."""
from tests.train.test_cli import torch_build  # noqa: F401
