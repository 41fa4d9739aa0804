"""When a run counts: the share of its LLM calls that failed or were repairs.

A run that is mostly repairs is not a result. One threshold and one count, used where runs are
written (meta.json), read for analysis (`mbb.analysis.load_runs`) and shown (the viewer); each
judges from the log, so a meta.json can make a run less valid, never more."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["INVALID_SHARE", "invalid_reason", "recorded_threshold", "run_validity"]

INVALID_SHARE = 0.05  # mbb's default: a run with a larger share of bad calls is invalid


def run_validity(lines: Iterable[str], threshold: float) -> dict[str, Any]:
    """A run's LLM calls, how many failed or were repairs, their share and whether the run is
    valid (share at most `threshold`); every call counts, from the cache or not.

    lines: the run's event log lines (checked); threshold: the largest share still valid."""
    calls = failed = repaired = 0
    for line in lines:
        if line.startswith('{"kind":"llm_call"'):
            d = json.loads(line)
            calls += 1
            failed += d.get("error") is not None
            repaired += bool(d.get("repair"))
    share = (failed + repaired) / calls if calls else 0.0
    return {
        "llm_calls": calls,
        "failed_calls": failed,
        "repaired_calls": repaired,
        "failed_or_repaired_share": round(share, 4),
        "threshold": threshold,
        "valid": share <= threshold,
    }


def invalid_reason(validity: Mapping[str, Any]) -> str | None:
    """Why a run is invalid, in one line (None when it is valid). validity: `run_validity`'s
    result."""
    if validity["valid"]:
        return None
    return (
        f"{validity['failed_or_repaired_share']:.1%} of its {validity['llm_calls']} LLM calls "
        f"failed or were repairs (more than {validity['threshold']:.0%})"
    )


def recorded_threshold(meta: Mapping[str, Any], default: float = INVALID_SHARE) -> float:
    """The threshold a run's meta.json records (its study's `failures.invalid_share`), else
    `default`. meta: the parsed meta.json; default: used when none is recorded (or not a
    number in [0, 1])."""
    v = meta.get("validity")
    t = v.get("threshold") if isinstance(v, Mapping) else None
    if isinstance(t, int | float) and not isinstance(t, bool) and 0 <= t <= 1:
        return float(t)
    return default
