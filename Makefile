# The two commands of the README: `make run` and `make test`. Everything else is set-up they call.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PARAMS ?= params/base.yaml
OUT    ?= outputs/base

.PHONY: run test lint lab bench clean-venv local-llm local-llm-install

# venv + editable install; re-done only when pyproject.toml changes. Debian packages come from
# scripts/system-packages.sh (installed when missing, as root; otherwise it says what to install).
$(VENV)/.installed: pyproject.toml
	@scripts/system-packages.sh run
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

# Main job: base condition notebook on the offline scripted population -> outputs/base/
run: $(VENV)/.installed
	$(PY) -m mbb notebook notebooks/run_condition.ipynb --params $(PARAMS) --out $(OUT)

# Test suite (CI calls exactly this through .ci/run). Exit 5 (= no tests collected) is a failure.
test: $(VENV)/.installed
	@scripts/system-packages.sh test
	@$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc = 5 ]; then echo "pytest collected no tests: that is a failure" >&2; fi; exit $$rc

# ruff (lint + format) and mypy (types: the package, configured in pyproject's [tool.mypy])
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check mbb tests bench
	$(VENV)/bin/ruff format --check mbb tests bench
	$(VENV)/bin/mypy

# As root (the usual case in a container) Jupyter refuses to start without --allow-root.
lab: $(VENV)/.installed
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) notebooks/

bench: $(VENV)/.installed
	$(PY) bench/bench_arena.py

clean-venv:
	rm -rf $(VENV)

# A real small model offline (optional): llama.cpp's server + SmolLM2-135M (see mbb/llm/local.py).
# `--check` passes when both are installed, built portably for this CPU, and the server answers
# one completion (a few seconds); otherwise `--install` builds llama-cpp-python for this CPU's
# feature set (~6 min once per machine; the wheel is kept in ~/.cache/mbb/wheels) and checks again.
local-llm-install: $(VENV)/.installed
	@scripts/system-packages.sh local-llm
	@$(PY) -m mbb local-llm --check || $(PY) -m mbb local-llm --install

# Serve SmolLM2 on 127.0.0.1:8080 and run params/local_llm.yaml -> outputs/local_llm/.
# Its test alone: MBB_LOCAL_LLM=1 make test PYTEST_ARGS="-m local_llm"
local-llm: local-llm-install
	$(PY) -m mbb local-llm params/local_llm.yaml --port 8080
