"""The package's metadata agrees with itself: environment.yml = the pip extras, one version,
a license file, an sdist that can rebuild the extension."""
import re
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

import tomllib
import yaml

import nntile_lab

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0].lower().replace("_", "-")


def pip_requirements() -> set[str]:
    """Every requirement of a full install: dependencies, each extra, the build's."""
    project = PYPROJECT["project"]
    reqs = set(project["dependencies"]) | set(PYPROJECT["build-system"]["requires"])
    for extra in project["optional-dependencies"].values():
        reqs |= {r for r in extra if _name(r) != "nntile-lab"}
    return reqs


def conda_pip_requirements() -> set[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip) == 1, "environment.yml has one pip: section"
    return set(pip[0])


def test_environment_yml_equals_the_pip_extras():
    conda, pip = conda_pip_requirements(), pip_requirements()
    # the same requirement strings, so that the two installs pin alike
    assert conda - pip == set(), f"in environment.yml, not in pyproject.toml: {conda - pip}"
    assert pip - conda == set(), f"in pyproject.toml, not in environment.yml: {pip - conda}"


def test_test_extra_composes_the_feature_extras():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert {"bench", "mpi", "jupyter", "wikitext", "docs", "test"} <= set(extras)
    # pinned: a bare torch pulls a CUDA build; transformers: the Llama's and generation's
    # Hugging Face references (tests, benchmarks)
    assert extras["bench"] == ["torch==2.13.0", "transformers>=5.23"]
    composed = next(r for r in extras["test"] if r.startswith("nntile_lab["))
    assert set(composed[len("nntile_lab["):-1].split(",")) == set(extras) - {"test"}


def test_one_version_source():
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert "version" not in PYPROJECT["project"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "nntile_lab.__version__"}
    assert metadata.version("nntile_lab") == nntile_lab.__version__


def test_license_file_is_mit():
    assert PYPROJECT["project"]["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert "LICENSE" in PYPROJECT["project"]["license-files"]


def test_sdist_has_everything_the_extension_build_needs(tmp_path):
    """The sdist the wheel is built from holds kernels/ whole (build script, codelet table
    and generator, every C, CUDA and OpenCL source and header) and setup.py's variant table."""
    proc = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation",
                           "--outdir", str(tmp_path), str(ROOT)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (sdist,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    # what the build generates from the codelet table (prototypes, the formulas' kernels)
    generated = {"kernels/cpu/prototypes.h", "kernels/cuda/prototypes.h",
                 "kernels/cpu/formulas.c", "kernels/cuda/formulas.cu"}
    needed = {str(p.relative_to(ROOT)) for p in (ROOT / "kernels").rglob("*")
              if p.suffix in (".py", ".c", ".h", ".cu", ".cuh", ".cl", ".clh")
              and str(p.relative_to(ROOT)) not in generated
              and "__pycache__" not in p.parts}
    assert {"kernels/build.py", "kernels/codegen.py", "kernels/codelets.py",
            "kernels/formulas.py", "kernels/formula.h"} <= needed
    assert not names & generated, "generated sources in the sdist"
    assert needed - names == set(), f"missing from the sdist: {sorted(needed - names)}"
    assert {"setup.py", "pyproject.toml", "LICENSE", "nntile_lab/cpu_variant.py",
            "nntile_lab/_ext/__init__.py"} <= names
    assert not [n for n in names if n.endswith((".so", ".o"))], "build outputs in the sdist"
