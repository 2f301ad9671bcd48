# Two commands do all set-up:  `make run` starts the app, `make test` lints and runs every test.
# Both create .venv and install the pinned requirements the first time.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: run test lint bench bench-gpu setup setup-dev chromium

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.installed-dev: requirements-dev.txt $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

setup: $(VENV)/.installed
setup-dev: $(VENV)/.installed-dev chromium

# Browser tests drive Debian's Chromium (Playwright cannot download browsers here), and their
# screenshots need fonts: each package is installed when it is missing, whether or not
# Chromium already is (without the emoji font every emoji in the UI is an empty box).
BROWSER_PACKAGES := chromium fonts-noto-color-emoji fonts-liberation fonts-dejavu-core

chromium:
	@missing=$$(for p in $(BROWSER_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  echo "installing" $$missing; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

run: setup
	$(BIN)/python app.py $(ARGS)

# Lint first (seconds): ruff, and the layer contract of pyproject.toml (docs/architecture.md).
lint: setup-dev
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache

test: lint
	$(BIN)/python -m pytest -q $(ARGS)

bench: setup-dev
	$(BIN)/python -m bench $(ARGS)

# On a CUDA machine: E2B's real shape in bfloat16, bare generate vs the app's engine, then the
# same with a random MTP drafter of the E2B drafter's shape. No downloads; under 10 minutes.
bench-gpu: setup
	$(BIN)/python -m bench.gpu_bench --with-drafter $(ARGS)
