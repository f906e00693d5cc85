"""The fenced code blocks of README.md and docs/*.md, as tests/docs/test_docs.py runs them.

Every block names its language in its info string (```python, ```bash, ```c, ```text), and
may be marked by an HTML comment on the line just above it (invisible on the site and on
GitHub; an info string with more than a language would break mkdocs' fences):

  ```python              run: a document's python blocks run in order in one fresh process,
                         as pasted into one Jupyter session (a later block may use an earlier
                         one's names; nothing else is defined)
  ```bash                run: the block by bash (``set -euo pipefail``) in a scratch folder
                         that looks like the checkout (commands are typed from its root)
  <!-- docs: excerpt: PATH -->
                         compared: the block's lines (indentation and python comments aside;
                         a line ``...`` skips any number of lines) appear in that file, in
                         order
  ```text                not code: output, a transcript
  <!-- docs: no-run: WHY -->
                         not run, with the reason: it needs another machine (a GPU, a
                         cluster) or a long run (minutes). Few are allowed (test_docs.py
                         counts them).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LANGS = ("python", "bash", "c", "text")
FENCE = re.compile(r"^(\s*)```(.*)$")
MARK = re.compile(r"^\s*<!-- docs: (no-run|excerpt): (.*?) -->\s*$")


@dataclass
class Block:
    path: Path
    line: int          # 1-based line of the opening fence
    lang: str
    mode: str          # "run", "excerpt", "text", "no-run"
    arg: str           # the excerpt's file, or the no-run reason
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def parse_info(info: str, above: str) -> tuple[str, str, str]:
    """``(lang, mode, arg)`` of a block from its info string ("python") and the line above
    its fence (a ``<!-- docs: no-run: WHY -->`` mark, or anything else)."""
    lang, _, rest = info.strip().partition(" ")
    if rest.strip():
        return lang, f"an info string with more than a language ({info.strip()!r})", ""
    mark = MARK.match(above)
    if mark:
        return lang, mark.group(1), mark.group(2).strip()
    return lang, ("text" if lang == "text" else "run"), ""


def blocks(path: Path) -> list[Block]:
    lines = path.read_text().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, info = m.groups()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith("```"):
            j += 1
        code = "\n".join(line[len(indent):] if line.startswith(indent) else line
                         for line in lines[i + 1:j])
        out.append(Block(path, i + 1, *parse_info(info, lines[i - 1] if i else ""), code))
        i = j + 1
    return out


def every_block() -> list[Block]:
    return [b for path in DOCS for b in blocks(path)]


def _code(line: str, lang: str) -> str:
    """A line as compared: indentation aside, and in python its comment too (the docs
    annotate excerpts; the code must be the file's)."""
    if lang == "python":
        line = re.sub(r"(^|\s)#.*$", "", line)
    return line.strip()


def excerpt_problem(block: Block) -> str | None:
    """Why an excerpt is not in its file (None: it is): each run of lines between ``...``
    lines must appear there, in order — compared as code, indentation, line breaks and
    python comments aside (the docs wrap and annotate what they quote)."""
    target = REPO / block.arg
    if not target.is_file():
        return f"{block.where}: excerpt of {block.arg}, which does not exist"

    def stream(lines) -> str:
        return " ".join(c for c in (_code(line, block.lang) for line in lines) if c)

    have = stream(target.read_text().split("\n"))
    chunks, chunk = [], []
    for line in block.code.split("\n"):
        if line.strip() == "...":
            chunks.append(chunk)
            chunk = []
        else:
            chunk.append(line)
    chunks.append(chunk)
    at = 0
    for chunk in chunks:
        text = stream(chunk)
        if not text:
            continue
        found = have.find(text, at)
        if found < 0:
            return (f"{block.where}: these lines are not in {block.arg} (in this order): "
                    f"{text[:100]!r} …")
        at = found + len(text)
    return None
