# The README's two commands: `make run` (main job) and `make test`.
PY := .venv/bin/python

.PHONY: run test test-fast test-release setup setup-test lint bench lab strip figures docs wheel
# The main job: train, trace two steps, sweep four tilings (~1 min, cached after the first
# run), all into one run directory.
RUN_DIR := runs/$(shell date +%Y%m%d-%H%M%S)
run:
	scripts/setup.sh
	.venv/bin/nntile-lab train --out $(RUN_DIR)
	.venv/bin/nntile-lab trace --out $(RUN_DIR)/trace --steps 2
	.venv/bin/nntile-lab sweep --inner-tile 512,1024 --vocab-tile 4096,8192 --out $(RUN_DIR)
	@echo "$(RUN_DIR): loss.png, sweep.png, trace/gantt.png (and the rest)"
	@echo "Open the notebooks in JupyterLab:  make lab"
	@echo "Three samples from the model it trained (nntile-lab sample --from $(RUN_DIR)):"
	.venv/bin/nntile-lab sample --from $(RUN_DIR) --num-samples 3 --max-new-tokens 40 \
		--temperature 0.8 --top-k 50 --seed 0

test:
	scripts/setup.sh test
	$(PY) -m pytest -q

# the tests without those marked slow (a minute or more each): a few minutes on two cores
test-fast:
	scripts/setup.sh test
	$(PY) -m pytest -q -m "not slow and not cuda and not long"

# before a release: `make test` N times (default 5) on a fresh clone (scripts/test_repeatedly.sh)
test-release:
	scripts/test_repeatedly.sh -n $(or $(N),5)

lint:
	.venv/bin/ruff check .

bench:
	$(PY) -m nntile_lab.cli bench gemm

# JupyterLab on the notebooks, with what every notebook needs (PyTorch, Open MPI + mpi4py)
lab:
	scripts/setup.sh lab
	.venv/bin/jupyter lab notebooks/

# the documentation site into site/ (warnings are errors, as in CI)
docs:
	.venv/bin/mkdocs build --strict

# sdist + wheel, the wheel installed in a fresh venv outside the checkout and smoke-tested
wheel:
	scripts/wheel_smoke.sh

# outputs never go into git: `make strip` before committing a notebook (a test checks)
strip:
	$(PY) scripts/strip_notebooks.py notebooks/*.ipynb

# the paper's figures at this machine's scale (`make figures SMOKE=1` for the 5-minute version)
figures:
	.venv/bin/nntile-lab figures $(if $(SMOKE),--smoke) --out runs/figures
