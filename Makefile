# dpopt make targets. Every target bootstraps .venv from pyproject.toml when it is missing.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: help install run test test-slow lint types bench bench-full bench-scale-full figures fig1 fig-rpp-adult \
	fig-rpp-heart fig-rpp-student fig-rpp-tightness fig-denoiser fig-dpsgd fig-sampler notebooks docs \
	docs-check docs-assets clean bench-scale bench-sampler dist

help:
	@echo "make run        bootstrap and run 'dpopt demo'"
	@echo "make test       the test suite (what CI runs)"
	@echo "make lint       ruff + mypy"
	@echo "make types      public parameters/returns still typed Any, per file (fails on unlisted ones)"
	@echo "make bench      solver benchmark, reduced grid (~5 min); bench-full for the full grid"
	@echo "make bench-sampler  the default private sampling run (5,000 certified releases) vs its peers"
	@echo "make bench-scale  Dask LocalCluster vs in-process, full solves to J = 1e7, one pass at 1e8"
	@echo "make bench-scale-full  the same with full certified solves at J = 1e8 (~1 h)"
	@echo "make figures    every reproduction figure under results/ (DASK=local|ADDRESS: sweeps on Dask)"
	@echo "make notebooks  execute the notebooks into docs/notebooks (the site's copies)"
	@echo "make docs       build the documentation site into site/ (mkdocs --strict)"
	@echo "make docs-check build the site and open it in headless Chromium"
	@echo "make dist       build the wheel into dist/ (pip install dist/dpopt-*.whl elsewhere)"

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,figures,notebooks,docs]'
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/dpopt demo

test: $(STAMP)
	$(PY) -m pytest -q -n 2

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy

types: $(STAMP)
	$(PY) scripts/public_any.py

bench: $(STAMP)
	$(PY) scripts/bench_covariance.py --timeout 30
	$(PY) scripts/bench_transport.py --sizes 30 100 10000 100000 --repeat 1
	$(PY) scripts/bench_accounting.py
	$(PY) scripts/bench_run_split.py
	$(PY) scripts/bench_box.py

bench-sampler: $(STAMP)
	$(PY) scripts/bench_sampler.py

bench-scale: $(STAMP)
	$(PY) scripts/bench_scale.py --solve-max 2e7   # J = 1e8: one pass per path, solve extrapolated
bench-scale-full: $(STAMP)
	$(PY) scripts/bench_scale.py --sizes 1e6 1e7 1e8 --solve-max 2e8 --inprocess-max 2e8  # full certified solves on both paths (took 51 min on 2 shared cores)

bench-full: $(STAMP)
	$(PY) scripts/bench_covariance.py --full
	$(PY) scripts/bench_transport.py

fig1: $(STAMP)
	$(PY) -m dpopt.figures fig1

fig-rpp-adult: $(STAMP)
	$(PY) -m dpopt.figures rpp-adult

fig-rpp-heart: $(STAMP)
	$(PY) -m dpopt.figures rpp-heart

fig-rpp-student: $(STAMP)
	$(PY) -m dpopt.figures rpp-student

fig-rpp-tightness: $(STAMP)
	$(PY) -m dpopt.figures rpp-tightness

fig-denoiser: $(STAMP)
	$(PY) -m dpopt.figures denoiser-covariance

fig-dpsgd: $(STAMP)
	$(PY) -m dpopt.figures dpsgd

fig-sampler: $(STAMP)
	$(PY) -m dpopt.figures sampler

figures: $(STAMP)
	$(PY) -m dpopt.figures all $(if $(DASK),--dask $(DASK))   # make figures DASK=local|tcp://host:8786

notebooks: $(STAMP)
	$(PY) scripts/run_notebooks.py

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

docs-check: docs
	$(PY) scripts/docs_check.py site

docs-assets: $(STAMP)
	$(PY) scripts/docs_assets.py

# the wheel: dpopt is on no package index, so it is installed from a clone or from this file
dist: $(STAMP)
	rm -rf dist build
	$(PY) -m pip wheel --no-deps -w dist .
	rm -rf build *.egg-info
	@ls dist/*.whl

clean:
	rm -rf $(VENV) results site dist build .pytest_cache .mypy_cache .ruff_cache
