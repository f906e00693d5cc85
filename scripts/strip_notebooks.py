#!/usr/bin/env python3
"""Strip outputs and execution counts from notebooks, in place and atomically.

    python scripts/strip_notebooks.py notebooks/*.ipynb      # strip
    python scripts/strip_notebooks.py --check notebooks/*.ipynb   # exit 1 if any has outputs

Needs only the standard library, so it runs before set-up (a git hook, say).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile


def strip(nb: dict) -> bool:
    """Remove outputs, execution counts and per-cell run metadata; True if anything changed."""
    changed = False
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        if cell.get("outputs") or cell.get("execution_count") is not None:
            changed = True
        cell["outputs"] = []
        cell["execution_count"] = None
        for key in ("execution", "collapsed", "scrolled"):
            if cell.get("metadata", {}).pop(key, None) is not None:
                changed = True
    if nb.get("metadata", {}).pop("widgets", None) is not None:  # saved widget state
        changed = True
    return changed


def write_atomic(path: str, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [a for a in argv if a != "--check"]
    dirty = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            nb = json.load(f)
        if strip(nb):
            dirty.append(path)
            if not check:
                write_atomic(path, json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    for path in dirty:
        print(f"{'has outputs' if check else 'stripped'}: {path}")
    return 1 if check and dirty else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
