"""How close `mbb estimate` comes to what a study then uses against a scripted endpoint.

The estimate dry-runs `--dry-runs` seeds (the condition's first seeds) through the real prompt
builder; the study then runs `--runs` other seeds (from 100) against the same kind of scripted
endpoint (`mbb.testing.emulate`, OpenAI-style prefix caching, the non-withdrawing stand-in
negotiator). Reported: the error of the estimate in total tokens, prompt tokens, completion
tokens and cost.

Usage: python bench/bench_estimate.py [--runs 6] [--dry-runs 2] [--params llm_negotiators]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import polars as pl  # noqa: E402

from mbb.batch.build import load_params, run_condition  # noqa: E402
from mbb.batch.estimate import _loopback, estimate_study, price_calls  # noqa: E402
from mbb.core.tables import tables_from_log  # noqa: E402
from mbb.testing.emulate import ProviderEmulator  # noqa: E402
from mbb.testing.testserver import FakeOpenAIServer, declaring_responder  # noqa: E402

PRICES = {"m-a": {"prompt": 0.4, "completion": 1.6, "cached_prompt": 0.1}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--dry-runs", type=int, default=2)
    ap.add_argument("--params", default="llm_negotiators")
    ap.add_argument("--subruns", type=int, default=None)
    args = ap.parse_args(argv)
    over = {
        "models": {
            "local": {
                "model": "m-a",
                "preset": "openai",
                "tool_protocol": "json_action",
                "structured": "json_schema",
            }
        },
        "workers": {"model": "local"},
        "prices": PRICES,
        "seed": 0,
    }
    if args.subruns:
        over["subruns"] = args.subruns
    cond = load_params(ROOT / "params" / f"{args.params}.yaml", over)
    est = estimate_study(cond, args.runs, dry_runs=args.dry_runs)
    print("estimate:", est.line())
    parts = []
    with FakeOpenAIServer(
        ProviderEmulator("openai", declaring_responder, reasoning=None), models=("m-a",)
    ) as srv:
        live = _loopback(cond, srv.url)
        for s in range(100, 100 + args.runs):
            parts.append(tables_from_log(run_condition(live, s, None).log)["llm_calls"])
    calls = pl.concat(parts)
    actual = {
        "tokens": float(calls["prompt_tokens"].sum() + calls["completion_tokens"].sum()),
        "prompt": float(calls["prompt_tokens"].sum()),
        "completion": float(calls["completion_tokens"].sum()),
        "cost": price_calls(calls, cond.prices),
    }
    predicted = {
        "tokens": est.tokens,
        "prompt": est.prompt_tokens,
        "completion": est.completion_tokens,
        "cost": est.cost_usd,
    }
    for k in actual:
        err = predicted[k] / actual[k] - 1 if actual[k] else 0.0
        print(f"{k:10s} estimated {predicted[k]:14.4f}  used {actual[k]:14.4f}  error {err:+6.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
