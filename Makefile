# spark_kafkawire — the commands a user and CI run. Python 3.10+ and Java 17 are assumed.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
SRC    := $(shell find spark_kafkawire -name '*.py' -o -name '*.tsv' -o -name '*.json' -o -name '*.properties' -o -name '*.c') pyproject.toml setup.py
# Spark's Python workers must run the venv's interpreter (it has pyarrow and this package)
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := tshark tcpdump wireshark-common kcat ethtool iproute2 chromium prometheus prometheus-node-exporter prometheus-pushgateway

.PHONY: state-fixture setup test-deps demo notebook test test-fast test-pure lint bench bench-instructions valgrind fuzz sample-pcaps system-deps clean schemas columns options

# what running needs (make demo): the package with Spark and the command line's extras
setup: $(VENV)/.installed

$(VENV)/.installed: $(SRC)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# (setuptools' build/ keeps the files of earlier builds: a module since moved or removed would be installed again)
	rm -rf build; find spark_kafkawire -name '*.so' -delete; rm -f spark_kafkawire/_native.json
	$(PY) -m pip install -q --upgrade pip
	# a regular (not editable) install: Spark finds the 'kafkawire' source among installed modules;
	# setup.py compiles the fast lane and the stages (mypyc) where a C compiler is there
	$(PY) -m pip install -q ".[spark,cli]"
	# the compiled parts beside the sources too, for code run from the checkout (the tests): the
	# fast lane, the stages mypyc compiled and the digest of their sources (spark_kafkawire/compiled.py
	# runs the sources instead once one of them is edited)
	$(PY) -c "import pathlib, shutil, sysconfig; site = pathlib.Path(sysconfig.get_paths()['platlib']); \
	  [shutil.copy(f, f.relative_to(site)) for f in [*(site / 'spark_kafkawire').rglob('*.so'), \
	  site / 'spark_kafkawire' / '_native.json']]"
	@$(PY) -c "import shutil, sys; from spark_kafkawire import compiled as c; \
	  print('compiled stages:', 'in use' if c.native else c.native_reason); \
	  loud = not c.native and shutil.which('cc') and 'PURE_PYTHON' not in (c.native_reason or ''); \
	  loud and print('\n' + '!' * 78 + '\n!! THE COMPILED STAGES DID NOT BUILD: everything runs as Python, about 3x slower.\n!! ' \
	  + str(c.native_reason) + '\n' + '!' * 78 + '\n', file=sys.stderr)"
	touch $@

# what the tests, lint, benchmarks and capture scripts need besides (pyproject.toml's "test" extra),
# installed without building the package again
test-deps: $(VENV)/.test-deps

$(VENV)/.test-deps: $(VENV)/.installed
	$(PY) -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']\
	  ['optional-dependencies']['test']))" > $(VENV)/test-requirements.txt
	$(PY) -m pip install -q -r $(VENV)/test-requirements.txt
	touch $@

# tshark (for the cross-check tests), tcpdump/dumpcap and kcat (to remake sample captures), chromium
# (the report is read in a real browser by the tests), Prometheus with promtool and the node exporter
# and the Pushgateway (the job's metrics are scraped by a real Prometheus in the tests)
system-deps:
	@command -v tshark >/dev/null && command -v kcat >/dev/null && command -v tcpdump >/dev/null && \
	  command -v chromium >/dev/null && command -v prometheus >/dev/null && \
	  command -v prometheus-node-exporter >/dev/null && command -v prometheus-pushgateway >/dev/null || \
	  ( $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(APT_PACKAGES) >/dev/null )

# the audit suite on the sample captures; it exits 2 there on purpose: they hold a client pinned to
# Kafka 0.10.1 and SASL PLAIN logins without TLS, which two policies reject
demo: setup
	@# the first time, an earlier night's audit (two of the samples) goes into out/audit/history, so
	@# that this run's report opens with what changed since (each run after replaces its own rows)
	@if [ ! -d out/audit/history/run_summary ]; then \
	  echo "make demo: first, an earlier night: the audit of two of the samples, kept in out/audit/history"; \
	  $(PY) jobs/audit.py sample_pcaps/mock-kcat.pcap sample_pcaps/tansu-confluent-codecs.pcap --out out/audit \
	    --quiet >/dev/null; rc=$$?; [ $$rc -ne 1 ] || exit 1; fi
	@$(PY) jobs/audit.py sample_pcaps --out out/audit; rc=$$?; \
	if [ $$rc -eq 2 ]; then echo; \
	  echo "make demo: the two [FAIL] verdicts above are expected. sample_pcaps/ holds, on purpose, clients"; \
	  echo "pinned to Kafka 0.9/0.10 (Produce versions 4.0 refuses) and SASL PLAIN logins without TLS."; \
	  echo "Open out/audit/report.html for the whole report: it opens with what changed since the earlier"; \
	  echo "night (out/audit/history keeps every run; see docs/audits.md, History)."; exit 0; fi; exit $$rc

# notebooks/explore.ipynb in Jupyter, on the samples (installs Jupyter into .venv the first time);
# JUPYTER_ARGS="--no-browser --port 8899" for a server without a browser
notebook: setup
	@$(PY) -c "import notebook" 2>/dev/null || $(PY) -m pip install -q "notebook>=7"
	cd notebooks && ../$(VENV)/bin/jupyter notebook explore.ipynb $$([ "$$(id -u)" = 0 ] && echo --allow-root) \
	  $(JUPYTER_ARGS)

# the tests write their bytecode (and pytest its rewritten test modules) where the environment says
# not to: otherwise every run compiles them all again, seconds in each worker
unexport PYTHONDONTWRITEBYTECODE

# everything, in three runs: the tests that start no Spark, cluster or S3 server over both cores
# (pytest-xdist), with the compiled parts and again with none (KAFKAWIRE_PURE_PYTHON=1, as an
# install without a compiler runs), then those that start servers, one at a time (one
# SparkSession, fixed cluster ports; live traffic whose times a test measures, with nothing else
# running beside it), with the compiled parts
SERVERS := spark or cluster or storage or timing
test: setup test-deps system-deps lint
	$(PY) -m pytest -n 2 --dist worksteal -m "not ($(SERVERS))"
	KAFKAWIRE_PURE_PYTHON=1 $(PY) -m pytest -n 2 --dist worksteal -m "not ($(SERVERS))"
	$(PY) -m pytest -m "$(SERVERS)"

# pyflakes, pycodestyle, bugbear and a complexity limit on the package and the jobs, types on the
# package (pyproject.toml), and the stages' import order (tests/test_layers.py)
lint: setup test-deps
	$(PY) -m ruff check spark_kafkawire jobs
	$(PY) -m mypy
	$(PY) -m pytest -q -p no:cacheprovider tests/test_layers.py

# the edit-run loop: unit and decoding tests from the checkout, no Spark, no servers and no
# reinstall (tshark's output on the project's own captures is kept in out/tshark/ between runs) (an edited stage module runs as Python until make setup rebuilds the compiled parts;
# after changing _lane.c, make setup too)
FAST := not spark and not cluster and not storage and not timing and not external and not slow
test-fast:
	@test -f $(VENV)/.test-deps || $(MAKE) test-deps
	$(PY) -m pytest -q -n 2 --dist worksteal -m "$(FAST)"

# the decoding tests again with no compiled code at all (as an install without a C compiler runs)
test-pure:
	@test -f $(VENV)/.test-deps || $(MAKE) test-deps
	KAFKAWIRE_PURE_PYTHON=1 $(PY) -m pytest -q -n 2 --dist worksteal -m "$(FAST)"

bench: setup test-deps system-deps valgrind
	$(PY) tests/tools/bench.py

# the instruction lines of make bench alone (callgrind: the same count on a busy machine)
bench-instructions: setup test-deps system-deps valgrind
	$(PY) tests/tools/bench.py instructions

# callgrind, for the benchmark's instruction lines (not needed by the tests)
valgrind:
	@command -v valgrind >/dev/null || ( $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq valgrind >/dev/null )

# a long fuzzing campaign (not in CI): FUZZ_INPUTS mutated inputs over two processes
FUZZ_INPUTS ?= 100000
fuzz: setup test-deps
	$(PY) tests/tools/fuzz_campaign.py $(FUZZ_INPUTS)

sample-pcaps: setup test-deps system-deps
	$(PY) sample_pcaps/make_samples.py

clean:
	rm -rf $(VENV) out build *.egg-info spark-warehouse; find spark_kafkawire -name "*.so" -delete; rm -f spark_kafkawire/_native.json

# Make rows/held.py and docs/rows.md's column tables again from rows/columns.py (after a column's
# declaration changed), then build the compiled stages again (held.py is one of them)
columns:
	test -x $(PY) || $(MAKE) setup
	$(PY) -m spark_kafkawire.rows.columns
	$(MAKE) setup

# Regenerate the Options and StreamOptions classes (options.py) and the options tables of docs/ from
# the one declaration of every option (options.OPTIONS)
options:
	test -x $(PY) || $(MAKE) setup
	$(PY) -c "from spark_kafkawire.options import main; main()"
	$(MAKE) setup

# Regenerate protocol/messages.json and errors.tsv from Kafka's schemas as kio carries them:
# kio 0.6.5 (Kafka 4.3) plus kio 0.5.0 (Kafka 3.9.0) for the versions 4.0 removed, plus the
# unreleased 4.4 versions transcribed in protocol/kafka-4.4.json.
schemas: setup test-deps
	rm -rf build/kio050 && mkdir -p build/kio050
	$(PY) -m pip download -q --no-deps -d build/kio050 kio==0.5.0
	cd build/kio050 && ../../$(PY) -m zipfile -e kio-0.5.0-py3-none-any.whl ext
	$(PY) spark_kafkawire/protocol/generate.py dump > build/kio-new.json
	PYTHONPATH=build/kio050/ext $(PY) spark_kafkawire/protocol/generate.py dump > build/kio-old.json
	$(PY) spark_kafkawire/protocol/generate.py merge build/kio-new.json build/kio-old.json spark_kafkawire/protocol/kafka-4.4.json spark_kafkawire/protocol

# the state kept for test_state.py (after the carried declarations change; keep the older one)
state-fixture: setup
	PYTHONPATH=.:tests $(PY) tests/make_state_fixture.py
