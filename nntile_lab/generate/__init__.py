"""Text from the models: sampling, stop conditions, left-padded batches, the KV-cache
decode loop and a streaming detokenizer (docs/generation.md)."""
from nntile_lab.generate.batching import Prompts, left_pad
from nntile_lab.generate.detokenize import StreamDecoder
from nntile_lab.generate.loop import Generation, GenerationInterrupted
from nntile_lab.generate.sampling import Sampler, Sampling, probabilities
from nntile_lab.generate.stopping import StopTokens

__all__ = ["Generation", "GenerationInterrupted", "Prompts", "Sampler", "Sampling",
           "StopTokens", "StreamDecoder", "left_pad", "probabilities"]
