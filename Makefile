# The README's two commands: `make run` (main job) and `make test`.
PY := .venv/bin/python

.PHONY: run test setup setup-test lint bench lab strip figures
run:
	scripts/setup.sh
	.venv/bin/nntile-lab train
	@echo "Open the notebooks in JupyterLab:  .venv/bin/jupyter lab notebooks/"

test:
	scripts/setup.sh test
	$(PY) -m pytest -q

lint:
	.venv/bin/ruff check .

bench:
	$(PY) -m nntile_lab.cli bench gemm

# JupyterLab on the notebooks (set-up first)
lab:
	scripts/setup.sh
	.venv/bin/jupyter lab notebooks/

# outputs never go into git: `make strip` before committing a notebook (a test checks)
strip:
	$(PY) scripts/strip_notebooks.py notebooks/*.ipynb

# the paper's figures at this machine's scale (`make figures SMOKE=1` for the 5-minute version)
figures:
	.venv/bin/nntile-lab figures $(if $(SMOKE),--smoke) --out runs/figures
