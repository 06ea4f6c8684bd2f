# robogen: two commands on a fresh machine.
#   make demo   set up .venv and compare the shipped pixel policies (plain vs augmented) on Push
#   make test   set up .venv and run the test suite
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.robogen-installed
export MUJOCO_GL ?= egl
DEMO_EPISODES ?= 72
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
	$(VENV)/bin/robogen eval --env robogen/Push-v0 --obs-mode state+pixels \
	  --policy flax:robogen/assets/policies/push_pixels_plain \
	  --policy flax:robogen/assets/policies/push_pixels_augmented \
	  --severities 1 --episodes $(DEMO_EPISODES) --videos 1 --seed 0 --out $(DEMO_OUT)/push-pixels
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

clean:
	rm -rf $(VENV) runs .pytest_cache
