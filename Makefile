# robogen: two commands on a fresh machine.
#   make demo   set up .venv and compare the shipped pixel policies (plain vs augmented) on Push
#   make test   set up .venv and run the test suite
# More: make docs (regenerate docs/reference/ and build the site into site/, strict),
# make lint, make check-slow, make bench; the batched backend: make setup-batched;
# suites: make setup-fetch, setup-metaworld,
# setup-suites (the MuJoCo 3.x track in .venv-suites), test-suites.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.robogen-installed
export MUJOCO_GL ?= egl
DEMO_EPISODES ?= 72
DEMO_OUT ?= runs/demo

.PHONY: setup setup-fetch setup-metaworld setup-batched setup-suites test-suites check-slow-suites demo test \
	check-slow bench preview lint docs clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check "torch==2.13.0"
	$(PY) -m pip install -q --disable-pip-version-check -e ".[dev]"
	@touch $(STAMP)

setup: $(STAMP)

# Optional env families (tests that need them skip when absent). Fetch installs next to
# mujoco 4.0 through the [fetch] extra; metaworld 3.1.1 pins mujoco==3.3.0 exactly, so it is
# installed without its dependencies (robogen fixes the one method mujoco 4.0 breaks).
setup-fetch: $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check -e ".[dev,fetch]"

# The batched backend (robogen/batched/, MuJoCo Warp): the [batched] extra. Its tests skip
# without it; warp compiles its kernels at first use and caches them (see docs/benchmarks.md).
setup-batched: $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check -e ".[dev,batched]"

setup-metaworld: $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check packaging
	$(PY) -m pip install -q --disable-pip-version-check --no-deps "metaworld==3.1.1"

# The MuJoCo 3.x track: .venv-suites, a second venv with mujoco 3.17.0 (what dm_control 1.0.50
# pins) and the suites that do not run on mujoco 4.0: dm_control 1.0.50 and robosuite 1.5.2, plus
# Meta-World and Fetch. robosuite is installed without its dependencies (its mink==0.0.5 pins
# numpy<2, which would pull jax, flax and pyarrow down; robogen does not use mink) and the ones it
# imports come from the [robosuite] extra; robogen fixes the two calls mujoco >= 3.12 breaks
# (robogen/envs/robosuite_env.py). Never switch a venv between mujoco 3.x and 4.x: a fresh one.
SUITES_VENV ?= .venv-suites
SUITES_PY := $(SUITES_VENV)/bin/python
SUITES_STAMP := $(SUITES_VENV)/.robogen-installed
SUITES_MUJOCO ?= 3.17.0

$(SUITES_STAMP): pyproject.toml
	@test -x $(SUITES_PY) || $(PYTHON) -m venv $(SUITES_VENV)
	$(SUITES_PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(SUITES_PY) -m pip install -q --disable-pip-version-check "torch==2.13.0"
	$(SUITES_PY) -m pip install -q --disable-pip-version-check "mujoco==$(SUITES_MUJOCO)" \
	  -e ".[dev,fetch,dm_control,robosuite]" packaging
	$(SUITES_PY) -m pip install -q --disable-pip-version-check --no-deps \
	  "metaworld==3.1.1" "robosuite==1.5.2"
	@touch $(SUITES_STAMP)

setup-suites: $(SUITES_STAMP)

# make test on the MuJoCo 3.x track (every test; the dm_control and robosuite ones run here)
test-suites: $(SUITES_STAMP)
	$(SUITES_PY) -m pytest -m "not slow" -q

check-slow-suites: $(SUITES_STAMP)
	$(SUITES_PY) -m pytest -m slow -q

demo: $(STAMP)
	rm -rf $(DEMO_OUT)
	$(VENV)/bin/robogen eval --env robogen/Push-v0 --obs-mode state+pixels \
	  --policy flax:robogen/assets/policies/push_pixels_plain \
	  --policy flax:robogen/assets/policies/push_pixels_augmented \
	  --severities 1 --episodes $(DEMO_EPISODES) --videos 1 --seed 0 --safety --out $(DEMO_OUT)/push-pixels
	@echo
	@echo "Reports (open in a browser):"
	@echo "  $(CURDIR)/$(DEMO_OUT)/push-pixels/compare.html     plain vs augmented, per axis"
	@echo "  $(CURDIR)/$(DEMO_OUT)/push-pixels/push_pixels_plain/report.html"
	@echo "  $(CURDIR)/$(DEMO_OUT)/push-pixels/push_pixels_augmented/report.html"

test: $(STAMP)
	$(PY) -m pytest -m "not slow" -q

check-slow: $(STAMP)
	$(PY) -m pytest -m slow -q

bench: $(STAMP)
	$(PY) benchmarks/bench_rollout.py

preview: $(STAMP)
	$(VENV)/bin/robogen preview --env robogen/PickPlace-v0 --out docs/preview.png

# ruff, then basedpyright (basic mode) on robogen/; diagnostics in .basedpyright/baseline.json
# predate the checker and are tolerated, new ones fail.
lint: $(STAMP)
	$(VENV)/bin/ruff check robogen tests benchmarks scripts
	$(VENV)/bin/basedpyright --pythonpath $(PY) robogen

# The documentation site (docs/, mkdocs.yml): the reference pages regenerated from the code,
# then mkdocs build --strict, which fails on any warning (a broken link or anchor included).
docs: $(STAMP)
	$(PY) scripts/gen_docs.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) $(SUITES_VENV) runs site .pytest_cache
