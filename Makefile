# loadbench: every target creates its own environment (.venv) first, so each works on a fresh clone.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
SHAPES ?= sa3
RESULTS ?= results
BENCH_ARGS ?=
PORT ?= 8501
export XLA_PYTHON_CLIENT_PREALLOCATE = false

.DEFAULT_GOAL := help
.PHONY: help install test lint sizes device-check device-wheels bench dashboard screenshots fuzz browser-deps remote-deps mpi-deps peers ports ports-deps zoo clean
PEERS_TORCH ?= torch==2.13.0
TUNIX ?= google-tunix==0.1.7

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) ## create .venv and install loadbench (editable) with its dev extra

peers: $(STAMP) ## add the peer loaders (runai-model-streamer, fastsafetensors, instanttensor) and torch to .venv
	$(PY) -m pip install -q '$(PEERS_TORCH)'
	$(PY) -m pip install -q -e '.[peers]'
	$(PY) -c "import torch, runai_model_streamer, fastsafetensors, instanttensor; print('peers: torch', torch.__version__)"

ports-deps: $(STAMP) ## add torch and transformers (the ports extra) to .venv
	$(PY) -m pip install -q '$(PEERS_TORCH)'
	$(PY) -m pip install -q -e '.[ports]'
	$(PY) -c "import torch, transformers; print('ports: torch', torch.__version__, 'transformers', transformers.__version__)"

ports: ports-deps ## check the GPT-2, Llama, ViT and BERT ports against torch (real HF layouts loaded strictly, fp32 and bf16, saved back)
	$(PY) -m pytest -q -s tests/unit/test_ports.py tests/unit/test_hf_layouts.py tests/unit/test_source_check.py tests/unit/test_writeback.py

zoo: $(STAMP) ## add google-tunix (a JAX model zoo: its Llama3 and loader, `--model zoo`) without its pins, and what its models import
	$(PY) -m pip install -q --no-deps '$(TUNIX)'
	$(PY) -m pip install -q -e '.[zoo]'
	$(PY) -c "import tunix.models.llama3.params, jax, flax, safetensors; print('zoo: tunix', __import__('importlib.metadata').metadata.version('google-tunix'), 'jax', jax.__version__, 'flax', flax.__version__, 'safetensors', safetensors.__version__)"

browser-deps: ## install Debian's chromium for the browser test (needs root; skipped otherwise)
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "browser-deps: could not install chromium; the browser test will be skipped"; \
	  else echo "browser-deps: chromium missing and not root; the browser test will be skipped"; fi; }

remote-deps: ## install Debian's nginx, strace and iproute2 for the remote-load tests and links (root; skipped otherwise)
	@missing="$$(for c in nginx:nginx strace:strace tc:iproute2; do command -v $${c%%:*} >/dev/null 2>&1 \
	  || [ -x /usr/sbin/$${c%%:*} ] || echo $${c##*:}; done)"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null) \
	      || echo "remote-deps: could not install $$missing; those remote tests will be skipped"; \
	  else echo "remote-deps: $$missing missing and not root; those remote tests will be skipped"; fi; fi

mpi-deps: ## install Debian's Open MPI (mpirun) for the tests under a real launcher (root; skipped otherwise)
	@command -v mpirun >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openmpi-bin >/dev/null) \
	      || echo "mpi-deps: could not install openmpi-bin; the mpirun tests will be skipped"; \
	  else echo "mpi-deps: mpirun missing and not root; the mpirun tests will be skipped"; fi; }

test: $(STAMP) browser-deps remote-deps mpi-deps ## run the test suite (CPU, 8 simulated devices)
	$(PY) -m pytest -q --durations=20

lint: $(STAMP) ## ruff (with the complexity rules) and format check, then mypy (config in pyproject.toml)
	$(VENV)/bin/ruff check loader bench shapes dashboard tests scripts
	$(VENV)/bin/ruff format --check loader bench shapes dashboard tests scripts
	$(VENV)/bin/mypy loader bench shapes dashboard

sizes: ## report module, folder and function sizes (a report to read, never a check)
	$(PYTHON) scripts/sizes.py

PART ?= small
device-check: ## on an accelerator machine, with its own python: one part of the device check (PART=small|large|budgets)
	bash scripts/device-check.sh --part $(PART)

DEVICE_PLATFORM ?= tpu
device-wheels: ## download the device check's pinned wheels for a device machine (.whl-tpu; DEVICE_PLATFORM=cuda: .whl)
	bash scripts/fetch-device-wheels.sh $(if $(filter tpu,$(DEVICE_PLATFORM)),.whl-tpu,.whl) $(DEVICE_PLATFORM)

bench: $(STAMP) ## run every strategy on SHAPES (default sa3), each in a fresh process, 3+ repeats until its time is clear
	@case "$(BENCH_ARGS)" in *--source*) $(MAKE) --no-print-directory remote-deps ;; esac
	$(VENV)/bin/loadbench bench run --shapes $(SHAPES) --repeats 3 --out $(RESULTS) $(BENCH_ARGS)

dashboard: $(STAMP) ## open the Streamlit dashboard over RESULTS on 127.0.0.1:PORT
	$(VENV)/bin/loadbench dashboard --results $(RESULTS) --port $(PORT)

screenshots: $(STAMP) browser-deps ## PNGs of every dashboard page into screenshots/ (over the test fixture, or RESULTS=DIR if it exists)
	$(PY) tests/dashboard/browser.py --out screenshots $$( [ -d "$(RESULTS)" ] && echo --results $(RESULTS) )

fuzz: $(STAMP) ## differential fuzzing vs safetensors: 100,000 atheris inputs + hypothesis; keeps new corpus inputs
	rm -rf .fuzz-work && mkdir -p .fuzz-work
	$(PY) -m tests.fuzz.campaign -runs=$${FUZZ_RUNS:-100000} -max_len=4096 -dict=tests/fuzz/header.dict \
	  -artifact_prefix=.fuzz-work/ .fuzz-work tests/fuzz_corpus
	$(PY) -m tests.fuzz.campaign -merge=1 -max_len=4096 tests/fuzz_corpus .fuzz-work 2>&1 | tail -n 2
	LOADBENCH_FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-3000} $(PY) -m pytest -q \
	  tests/unit/test_fuzz.py tests/unit/test_fuzz_corpus.py

clean: ## remove the venv and caches (not results)
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis .fuzz-work
