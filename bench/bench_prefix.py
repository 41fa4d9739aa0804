"""Prefix reuse of mbb's prompts, measured with a logging loopback server (no model, no network).

The share reported is: of all prompt characters sent, the share that repeats a prefix of at
least 4,096 characters of an earlier request. A prompt is laid out as a chat template lays it
out (`mbb.testing.emulate.prompt_text`: each message's role and content in order), which is what a
server-side prefix cache (OpenAI's automatic caching, vLLM/SGLang prefix caching, llama.cpp's
`cache_prompt`) can reuse. The replay cache is off, so every request reaches the server.

Conditions: `llm_negotiators` (5 LLM negotiators, modeled solver, 4 subruns: the base condition
with LLM negotiators) and `llm_solvers` (3 workers, LLM negotiators and LLM solvers on real
tasks, 2 subruns; the stand-in solver model of the tests). Both with the local llama.cpp-style
config (`json_object_schema`, JSON actions) and with a hosted-style one (`json_schema`, native
tools).

Usage: python bench/bench_prefix.py [--seeds 0,1] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mbb.batch.build import load_params, run_condition  # noqa: E402
from mbb.testing.emulate import PrefixLog, prompt_text  # noqa: E402
from mbb.testing.testserver import FakeOpenAIServer, Reply, declaring_responder  # noqa: E402

MIN_CHARS = 4096


def role_of(body: dict[str, Any]) -> str:
    system = (body.get("messages") or [{}])[0].get("content") or ""
    return "solver" if "solver of worker" in system[:200] else "negotiator"


class Logging:
    """Answers with the inner responder; measures reuse overall and per role."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.all = PrefixLog(MIN_CHARS)
        self.by_role: dict[str, PrefixLog] = defaultdict(lambda: PrefixLog(MIN_CHARS))
        self.role_chars: dict[str, list[int]] = defaultdict(lambda: [0, 0])

    def __call__(self, body: dict[str, Any]) -> Reply:
        text = prompt_text(body)
        reused = self.all.add(text)
        role = role_of(body)
        self.role_chars[role][0] += len(text)
        self.role_chars[role][1] += reused
        return self.inner(body)

    def share(self, role: str | None = None) -> float:
        if role is None:
            return self.all.share
        total, reused = self.role_chars[role]
        return reused / total if total else 0.0


def _model(url: str, hosted: bool) -> dict[str, Any]:
    model = {
        "model": "m-a",
        "base_url": url,
        "api_key_env": None,
        "timeout_s": 30.0,
        "max_retries": 2,
        "concurrency": 5,
    }
    if hosted:
        model.update(structured="json_schema", tool_protocol="native")
    else:
        model.update(structured="json_object_schema", tool_protocol="json_action")
    return model


def measure(kind: str, seeds: list[int], hosted: bool, tmp: Path) -> dict[str, Any]:
    if kind == "llm_solvers":
        sys.path.insert(0, str(ROOT))
        from tests.llm.solver_model import SolverScript

        inner: Any = SolverScript()
    else:
        inner = declaring_responder
    log = Logging(inner)
    with FakeOpenAIServer(log, models=("m-a",)) as srv:
        over: dict[str, Any] = {
            "models": {"local": _model(srv.url, hosted)},
            "workers": {"model": "local"},
            "llm": {"cache": "off"},
        }
        if kind == "llm_solvers":
            over.update(subruns=2, workers={"count": 3, "model": "local"})
            over["tasks"] = {"suite": ["rev", "tac", "head"]}
        cond = load_params(ROOT / "params" / f"{kind}.yaml", over)
        t0 = time.perf_counter()
        for s in seeds:
            run_condition(cond, s, None)
        wall = time.perf_counter() - t0
    return {
        "condition": kind,
        "layout": "hosted (json_schema, native tools)" if hosted else "local (json_object_schema)",
        "requests": log.all.requests,
        "prompt_chars": log.all.total_chars,
        "share_all": log.share(),
        "share_negotiator": log.share("negotiator"),
        "share_solver": log.share("solver") if kind == "llm_solvers" else None,
        "wall_s": wall,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--quick", action="store_true", help="local layout only")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("llm_negotiators", "llm_solvers"):
            for hosted in (False,) if args.quick else (False, True):
                rows.append(measure(kind, seeds, hosted, Path(tmp)))
    print(f"prefix reuse (share of prompt chars repeating a >= {MIN_CHARS}-char earlier prefix)")
    for r in rows:
        solver = "" if r["share_solver"] is None else f"  solver {r['share_solver']:6.1%}"
        print(
            f"{r['condition']:16s} {r['layout']:36s} {r['requests']:5d} req "
            f"{r['prompt_chars'] / 1e6:6.2f} M chars  all {r['share_all']:6.1%}  "
            f"negotiator {r['share_negotiator']:6.1%}{solver}  ({r['wall_s']:.1f} s)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
