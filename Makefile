# The README's two commands: `make run` (main job) and `make test`.
PY := .venv/bin/python

.PHONY: run test setup setup-test lint bench
run:
	scripts/setup.sh
	.venv/bin/nntile-lab train

test:
	scripts/setup.sh test
	$(PY) -m pytest -q

lint:
	.venv/bin/ruff check .

bench:
	$(PY) -m nntile_lab.cli bench gemm
