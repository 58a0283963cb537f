# The two commands: `make run` and `make test`. Both build .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: run test lint bench bench-quick clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m ratatoskr serve

lint: $(STAMP)
	$(VENV)/bin/ruff check ratatoskr tests bench
	$(VENV)/bin/ruff format --check ratatoskr tests bench
	$(VENV)/bin/mypy ratatoskr

test: lint
	HYPOTHESIS_PROFILE=ci $(PY) -m pytest -q

bench: $(STAMP)
	$(PY) -m bench.memory_search

bench-quick: $(STAMP)
	$(PY) -m bench.memory_search --quick

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
