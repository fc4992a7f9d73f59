# The two quick-start commands: `make demo` and `make test`. Each creates the virtual environment
# and installs the package on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: demo test lint bench browser

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch/torchvision first: lmms-eval needs them, and this pair is the one our machines carry.
	$(PY) -m pip install --quiet torch==2.14.1 torchvision==0.29.1
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

demo: $(VENV)/.installed
	HF_HUB_OFFLINE=1 $(VENV)/bin/edct demo

# The browser tests (audit report, annotation page) drive Debian's chromium through Playwright
# (`playwright install` is never used). Installed here when missing and apt-get can run.
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "note: /usr/bin/chromium is missing: install Debian's chromium package for the browser tests"; \
	  fi; \
	fi

test: $(VENV)/.installed browser
	HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 $(PY) -m pytest -n 2 -q $(PYTEST_ARGS)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

bench: $(VENV)/.installed
	HF_HUB_OFFLINE=1 $(PY) benchmarks/bench_driver.py
