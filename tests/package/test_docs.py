"""The documentation: the site builds with warnings as errors, and the README's links lead
somewhere."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_site_builds_strict(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    # the reference comes from the docstrings
    assert "TiledTensor" in api and "ExperimentSpec" in api


def test_readme_is_short_and_its_links_exist():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 80
    # the figure near the top, the two commands
    assert text.index("![") < text.index("## Two commands")
    assert "make run" in text and "make test" in text
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not link.startswith("http")]
    assert local and [link for link in local if not (ROOT / link).exists()] == []
