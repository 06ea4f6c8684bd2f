# robogen: two commands on a fresh machine.
#   make demo   set up .venv and evaluate the shipped checkpoint and the PickPlace expert
#   make test   set up .venv and run the test suite
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.robogen-installed
export MUJOCO_GL ?= egl
DEMO_EPISODES ?= 80
DEMO_OUT ?= runs/demo

.PHONY: setup setup-fetch setup-metaworld setup-suites demo test check-slow bench preview lint clean

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

setup-metaworld: $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check packaging
	$(PY) -m pip install -q --disable-pip-version-check --no-deps "metaworld==3.1.1"

setup-suites: setup-fetch setup-metaworld

demo: $(STAMP)
	rm -rf $(DEMO_OUT)
	$(VENV)/bin/robogen eval --env gymnasium/Reacher-v5 \
	  --policy sb3:robogen/assets/checkpoints/ppo_reacher.zip \
	  --vecnormalize robogen/assets/checkpoints/ppo_reacher_vecnormalize.pkl \
	  --severities 0.5,1 --episodes $(DEMO_EPISODES) --seed 0 --out $(DEMO_OUT)/reacher-ppo
	$(VENV)/bin/robogen eval --env robogen/PickPlace-v0 --policy expert:pick_place \
	  --severities 0.5,1 --episodes $(DEMO_EPISODES) --seed 0 --out $(DEMO_OUT)/pickplace-expert
	@echo
	@echo "Reports (open in a browser):"
	@echo "  $(CURDIR)/$(DEMO_OUT)/reacher-ppo/report.html"
	@echo "  $(CURDIR)/$(DEMO_OUT)/pickplace-expert/report.html"

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

clean:
	rm -rf $(VENV) runs .pytest_cache
