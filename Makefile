# spark_kafkawire — the commands a user and CI run. Python 3.10+ and Java 17 are assumed.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
SRC    := $(shell find spark_kafkawire -name '*.py' -o -name '*.tsv') pyproject.toml
# Spark's Python workers must run the venv's interpreter (it has pyarrow and this package)
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := tshark tcpdump wireshark-common kcat ethtool iproute2

.PHONY: setup demo test bench sample-pcaps system-deps clean

setup: $(VENV)/.installed

$(VENV)/.installed: $(SRC)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# a regular (not editable) install: Spark finds the 'kafkawire' source among installed modules
	$(PY) -m pip install -q ".[spark,test]"
	touch $@

# tshark (for the cross-check tests), tcpdump/dumpcap and kcat (to remake sample captures)
system-deps:
	@command -v tshark >/dev/null && command -v kcat >/dev/null && command -v tcpdump >/dev/null || \
	  ( $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(APT_PACKAGES) >/dev/null )

demo: setup
	$(PY) jobs/exchange_summary.py sample_pcaps --out out/exchanges

test: setup system-deps
	$(PY) -m pytest

bench: setup system-deps
	$(PY) tests/bench.py

sample-pcaps: setup system-deps
	$(PY) sample_pcaps/make_samples.py

clean:
	rm -rf $(VENV) out build *.egg-info spark-warehouse
