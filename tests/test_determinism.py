"""The test suite's own rules (issue 33 §1): every random input follows from the test's own
draw or seed, and every kernel-parity check goes through one tolerance helper.

- No test module holds a random generator at module level: its state depends on which tests
  ran before in this process (a file run alone draws other values than the whole suite), and
  under hypothesis a failure's replay draws other arrays ("flaky", unshrinkable). Property
  tests draw ``seed`` from ``tests.strategies.seeds()``; others build a local generator.
- No global or unseeded randomness: ``np.random.rand``/``seed``/..., ``random.random()``,
  ``default_rng()`` without a seed.
- The kernel-parity tests (tests/ops, tests/kernels) compare floats only through
  ``tests.tolerance.assert_close`` (element-wise, against each op's magnitude) or exactly.
"""
from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
GENERATORS = ("default_rng", "RandomState", "Random", "Generator", "SeedSequence")
GLOBAL_RANDOM = {"np.random." + f for f in (
    "rand", "randn", "randint", "random", "seed", "normal", "uniform", "choice", "shuffle",
    "permutation", "standard_normal", "integers")} | {
    "random." + f for f in ("random", "randint", "choice", "shuffle", "uniform", "seed",
                            "sample", "gauss", "randrange")}
LOOSE = ("assert_allclose", "allclose", "isclose", "cond_err", "sum_err")


def _modules():
    return sorted(p for p in TESTS.rglob("*.py") if p.name != Path(__file__).name)


def _call_name(node: ast.Call) -> str:
    return ast.unparse(node.func)


def test_no_test_module_holds_a_random_generator():
    found = []
    for path in _modules():
        for node in ast.parse(path.read_text()).body:
            value = getattr(node, "value", None)
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(value, ast.Call) \
                    and _call_name(value).split(".")[-1] in GENERATORS:
                found.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert not found, ("module-level random generators (draw a seed in the test: "
                       f"tests.strategies.seeds()): {found}")


def test_no_global_or_unseeded_randomness():
    found = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = _call_name(node)
            unseeded = name.split(".")[-1] in ("default_rng", "Random") and not node.args \
                and not node.keywords
            if name in GLOBAL_RANDOM or unseeded:
                found.append(f"{path.relative_to(TESTS)}:{node.lineno}: {name}")
    assert not found, f"global or unseeded randomness: {found}"


def test_kernel_parity_tests_use_the_one_tolerance_helper():
    found = []
    for folder in ("ops", "kernels"):
        for path in sorted((TESTS / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                name = (node.id if isinstance(node, ast.Name) else
                        node.attr if isinstance(node, ast.Attribute) else None)
                if name in LOOSE:
                    found.append(f"{path.relative_to(TESTS)}:{node.lineno}: {name}")
    assert not found, ("float comparisons outside tests.tolerance.assert_close (give the "
                       f"op's magnitude and ulps): {found}")
