# The two commands: `make run` and `make test`. Both build .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: run test system-packages lint console-screenshots bench bench-quick bench-1m bench-sql-gil bench-http bench-client bench-writers bench-write-modes bench-restore power-cut bench-postgres soak soak-steady token-flood profile-upsert clean

# setup.py builds the optional C accelerators with the machine's C compiler
$(STAMP): pyproject.toml setup.py ratatoskr/memory/_pack.c ratatoskr/memory/_body.c ratatoskr/memory/_narrow.h ratatoskr/memory/_decimal.h $(wildcard ratatoskr/memory/search/_rank*)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,pgtest]'
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m ratatoskr serve

lint: $(STAMP)
	$(VENV)/bin/ruff check ratatoskr tests bench
	$(VENV)/bin/ruff format --check ratatoskr tests bench
	$(VENV)/bin/mypy ratatoskr tests bench

# the Debian packages the suite needs (.ci/run runs the same script): quick when all are there
system-packages:
	bash .ci/system-packages

# the whole suite, then the store and search suites again on the pure-Python/numpy paths
# (what an install without a C compiler runs)
# the client suites that drive every verb and error through a real server: the wire's path
# without the accelerators (the rest of tests/client is the client's own mechanics)
CLIENT_END_TO_END = tests/client/test_verbs.py tests/client/test_errors.py \
	tests/client/test_property.py tests/client/test_first_run.py

test: system-packages lint
	HYPOTHESIS_PROFILE=ci $(PY) -m pytest -q
	HYPOTHESIS_PROFILE=ci RATATOSKR_NO_ACCELERATORS=1 RATATOSKR_TEST_BACKENDS=sqlite $(PY) -m pytest -q tests/memory $(CLIENT_END_TO_END)

# the console's main views, as the browser tests see them, into docs/console/ (docs/operations.md)
console-screenshots: $(STAMP)
	RATATOSKR_CONSOLE_SCREENSHOTS=docs/console $(PY) -m pytest -q tests/console/test_browser.py

# the optional peers extra (Chroma and LanceDB), which only the benchmark uses
PEERS_STAMP := $(VENV)/.peers-stamp
$(PEERS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[peers]'
	touch $(PEERS_STAMP)

# 100k x 768 beside numpy, plain sqlite-vec, Chroma and LanceDB (the peers extra, installed
# first), then 1M x 384, the SQL route beside a busy thread, upsert_many from 1 and 2
# processes and the HTTP load test (their figures are printed; the notes of
# docs/performance.md quote them), then the client bench. ~30 min in all.
bench: $(PEERS_STAMP)
	$(PY) -m bench.memory_search --peers --tail 30
	$(MAKE) bench-1m
	$(MAKE) bench-sql-gil
	$(MAKE) bench-writers
	$(MAKE) bench-http
	$(MAKE) bench-client

bench-quick: $(STAMP)
	$(PY) -m bench.memory_search --quick

# 1M x 384, loaded through upsert_many in batches of 1,000 (~6 min); its own report file.
bench-1m: $(STAMP)
	$(PY) -m bench.memory_search --n 1000000 --dim 384 --batch 1000 --queries 50 --tail 30 --out docs/performance-1m.md

# the SQL route alone and beside a busy Python thread (~30 s)
bench-sql-gil: $(STAMP)
	$(PY) -m bench.sql_gil

bench-http: $(STAMP)
	$(PY) -m bench.http_load --chunks 20000 --duration 60 --workers 2 --concurrency 8

# the client and the HTTP path (docs/performance.md, "The client and the HTTP path"): upsert_many
# server time beside decode + hash + store and the store alone, Client and AsyncClient beside
# the raw-socket searches of bench-http (~4 min)
bench-client: $(STAMP)
	$(PY) -m bench.client_load --chunks 100000 --batch 500 --dim 768 --workers 2 --concurrency 8

# where a 500 x 768 upsert_many spends the server's time between the socket and the store:
# py-spy samples one single-process server (the profile extra) while bench.client_load loads
profile-upsert: $(STAMP)
	$(PY) -m pip install --quiet -e '.[profile]'
	$(PY) -m bench.profile_upsert

# upsert_many from 1 and then 2 processes into one file (what 2 gunicorn workers can write)
bench-writers: $(STAMP)
	$(PY) -m bench.upsert_writers --writers 1
	$(PY) -m bench.upsert_writers --writers 2

# the store's writes timed under FULL and NORMAL side by side (docs/performance.md)
bench-write-modes: $(STAMP)
	$(PY) -m bench.write_modes

# SQLite and PostgreSQL side by side at 100k x 768 beside pgvector's own exact query, then
# HTTP searches/s for one and two servers over one PostgreSQL; the table goes to the end of
# docs/performance.md (~10 min)
bench-postgres: $(STAMP)
	$(PY) -m bench.postgres_search
	$(PY) -m bench.postgres_http --chunks 20000 --duration 30

# reliability benchmarks (docs/reliability.md), not part of `make test`

# 500 power cuts under the real server with FULL, then 50 with NORMAL (root: FUSE; ~12 min)
power-cut: system-packages $(STAMP)
	$(PY) -m bench.power_cut --cuts 500 --synchronous FULL
	$(PY) -m bench.power_cut --cuts 50 --synchronous NORMAL

soak: $(STAMP)
	$(PY) -m bench.soak

# the same mix over a fixed set of ids after a fill: files stop growing, so RSS can show a leak
soak-steady: $(STAMP)
	$(PY) -m bench.soak --steady

token-flood: $(STAMP)
	$(PY) -m bench.token_flood

# the disaster drill's recovery point and the restore of 100k chunks (docs/reliability.md)
bench-restore: $(STAMP)
	$(PY) -m bench.restore_drill

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
