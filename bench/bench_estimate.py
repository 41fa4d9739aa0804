"""How close `mbb estimate` comes to what the runs then use, for every shipped preset.

For each preset of `mbb.llm.presets.PRESETS`, a model of that preset (the reasoning ones at a
reasoning effort, or reasoning by default) negotiates in `--params` (default llm_negotiators).
`estimate` dry-runs `--dry-runs` seeds against a loopback endpoint emulating that preset
(`mbb.testing.emulate`); then `--runs` other seeds run against the same kind of endpoint, whose
model reasons a different length on every call (±50 % around mbb's per-effort assumption:
the estimate cannot know each call's length, only the mean). Repeated `--reps` times with other
seeds; reported per preset: estimate / used for calls, prompt, cached, completion, reasoning
tokens and cost, as min–max over the repetitions.

What this measures: the machinery (each preset's request accepted, its usage fields read,
prefix caching and reasoning reported as that provider does, scaling from a few seeds to a
study). It does not measure how long a real model's answers and reasoning are: that is an
assumption (`presets.REASONING_TOKENS`), to be calibrated from real runs (`--reasoning-from`).

With `--wall openai,openai_reasoning`, those presets' wall time is also estimated and measured:
`--runs` runs at once against an endpoint answering in `--wall-latency` seconds.

Usage: python bench/bench_estimate.py [--runs 4] [--dry-runs 2] [--reps 3] [--subruns 2]
       [--presets openai,...] [--wall openai] [--wall-latency 0.2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mbb.batch.build import load_params, run_seeds  # noqa: E402
from mbb.batch.estimate import Latency, _loopback, emulated_calls, estimate  # noqa: E402
from mbb.llm.presets import PRESETS  # noqa: E402
from mbb.testing.emulate import ProviderEmulator  # noqa: E402
from mbb.testing.testserver import FakeOpenAIServer, declaring_responder  # noqa: E402

# preset -> (model name sent, extra config): a reasoning preset at an effort, or reasoning alone
MODELS = {
    "openai": ("gpt-4o-mini", {}),
    "openai_reasoning": ("o4-mini", {"reasoning_effort": "medium", "max_tokens": 8192}),
    "anthropic": ("claude-sonnet-4-5", {}),
    "gemini": ("gemini-2.5-flash", {"reasoning_effort": "low", "max_tokens": 8192}),
    "deepseek": ("deepseek-reasoner", {"max_tokens": 8192}),  # always reasons
    "openrouter": ("openai/o4-mini", {"reasoning_effort": "high", "max_tokens": 8192}),
    "vllm": ("qwen3-8b", {}),
    "ollama": ("gpt-oss:20b", {"reasoning_effort": "low", "max_tokens": 8192}),
    "llamacpp": ("smollm2", {}),
}
PRICE = {"prompt": 1.0, "completion": 4.0, "cached_prompt": 0.25}  # the same for every preset
KEYS = ("calls", "prompt", "cached", "completion", "reasoning", "cost")


def condition(preset: str, params: str, subruns: int, seed: int):
    model, extra = MODELS[preset]
    cfg = {"model": model, "preset": preset, "api_key_env": None, **extra}
    over = {
        "name": f"bench_{preset}",
        "seed": seed,
        "subruns": subruns,
        "workers": {"count": 3, "model": "m"},
        "models": {"m": cfg},
        "prices": {model: PRICE},
    }
    return load_params(ROOT / "params" / f"{params}.yaml", over)


def used(cond, seeds) -> dict[str, float]:
    calls, _ = emulated_calls(cond, seeds, spread=0.5)
    price = cond.prices[cond.models["m"].model]
    return {
        "calls": float(calls.height),
        "prompt": float(calls["prompt_tokens"].sum()),
        "cached": float(calls["cached_tokens"].sum()),
        "completion": float(calls["completion_tokens"].sum()),
        "reasoning": float(calls["reasoning_tokens"].sum()),
        "cost": sum(
            price.cost(r["prompt_tokens"], r["completion_tokens"], r["cached_tokens"])
            for r in calls.iter_rows(named=True)
        ),
    }


def wall(preset: str, params: str, subruns: int, runs: int, dry_runs: int, lat: float) -> str:
    """Estimated vs measured wall time of `runs` runs at once against an endpoint answering
    in `lat` seconds (the estimate told that latency, with completion tokens free)."""
    cond = condition(preset, params, subruns, seed=0)
    (row,) = estimate(cond, runs=runs, dry_runs=dry_runs, latency=Latency(lat, 1e12))
    emulator = ProviderEmulator(preset, declaring_responder)
    with FakeOpenAIServer(emulator, models=(MODELS[preset][0],), delay_s=lat) as srv:
        live = _loopback(cond, {preset: srv.url})
        t0 = time.perf_counter()
        results = run_seeds(live, list(range(500, 500 + runs)))
        took = time.perf_counter() - t0
    assert not [r for r in results if isinstance(r, BaseException)], results
    return (
        f"{preset:18s} wall: estimated {row.wall_s:6.1f} s ({row.wall_bound}), measured "
        f"{took:6.1f} s: ratio {row.wall_s / took:.2f}; {runs} runs at once, {lat} s a call, "
        f"{row.calls / runs:.0f} calls a run, {row.critical_path_s / lat:.0f} of them in sequence"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--dry-runs", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--subruns", type=int, default=2)
    ap.add_argument("--params", default="llm_negotiators")
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--wall", default="", help="presets whose wall time is measured too")
    ap.add_argument("--wall-latency", type=float, default=0.2, help="seconds a call, for --wall")
    args = ap.parse_args(argv)
    print(
        f"{args.params}, 3 workers, {args.subruns} subruns; estimate from {args.dry_runs} dry "
        f"run(s), compared with {args.runs} run(s) of other seeds; {args.reps} repetitions"
    )
    print(f"{'preset':18s} {'model/effort':28s} " + " ".join(f"{k:>13s}" for k in KEYS))
    worst = 0.0
    for preset in args.presets.split(","):
        t0 = time.perf_counter()
        ratios: dict[str, list[float]] = {k: [] for k in KEYS}
        zero: dict[str, bool] = {k: True for k in KEYS}
        row = None
        for rep in range(args.reps):
            cond = condition(preset, args.params, args.subruns, seed=1000 * rep)
            (row,) = estimate(cond, runs=args.runs, dry_runs=args.dry_runs)
            predicted = {
                "calls": row.calls,
                "prompt": row.prompt_tokens,
                "cached": row.cached_tokens,
                "completion": row.completion_tokens,
                "reasoning": row.reasoning_tokens,
                "cost": row.cost_usd or 0.0,
            }
            start = 1000 * rep + 500
            actual = used(cond, range(start, start + args.runs))
            for k in KEYS:
                if actual[k]:
                    ratios[k].append(predicted[k] / actual[k])
                    zero[k] = False
                elif predicted[k]:  # estimated some where the runs used none
                    ratios[k].append(float("inf"))
                    zero[k] = False
        cells = []
        for k in KEYS:
            if zero[k]:
                cells.append("0 = 0")
            else:
                lo, hi = min(ratios[k]), max(ratios[k])
                worst = max(worst, abs(lo - 1), abs(hi - 1))
                cells.append(f"{lo:.3f}-{hi:.3f}")
        assert row is not None
        how = f"{row.endpoint_model}/{row.effort or '-'}"
        print(
            f"{preset:18s} {how:28s} "
            + " ".join(f"{c:>13s}" for c in cells)
            + f"   ({time.perf_counter() - t0:.0f} s)"
        )
    print(f"largest error of any ratio: {worst:.1%} (target: within 25 %)")
    for preset in [p for p in args.wall.split(",") if p]:
        print(wall(preset, args.params, args.subruns, args.runs, args.dry_runs, args.wall_latency))
    return 0 if worst <= 0.25 else 1


if __name__ == "__main__":
    raise SystemExit(main())
