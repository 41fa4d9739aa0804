"""When a run counts: the share of its LLM calls that failed or were repairs.

A run that is mostly repairs is not a result. Nor is one mostly run on defaults applied because
an agent's call raised something other than a failed LLM call (a bug, an answer no reader
could parse): each such `invalid_action` (field `BACKEND_FIELD`) counts as one more failed call
(mbb's choice; a failed LLM call is already counted by its `llm_call` event).

One threshold and one count, used where runs are written (meta.json), read for analysis
(`mbb.analysis.load_runs`) and shown (the viewer); each judges from the log, so a meta.json can
make a run less valid, never more."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from mbb.core.errors import LlmUnavailable

__all__ = [
    "BACKEND_FIELD",
    "COUNTED_BY_CALLS",
    "INVALID_SHARE",
    "MAX_INVALID_SHARE",
    "invalid_reason",
    "recorded_threshold",
    "run_validity",
]

INVALID_SHARE = 0.05  # mbb's default: a run with a larger share of bad calls is invalid
# the loosest threshold a study may set, and a meta.json may record: a run whose calls mostly
# failed or were repaired is never a result, whatever a record in its folder says (mbb's choice;
# a meta.json recording 1.0 made a run whose every call failed count as valid)
MAX_INVALID_SHARE = 0.5
BACKEND_FIELD = "(backend)"  # an invalid_action's field when the agent's call itself raised
# exceptions whose failed call its llm_call event records already (not counted twice)
COUNTED_BY_CALLS = frozenset(
    {LlmUnavailable.__name__, *(c.__name__ for c in LlmUnavailable.__subclasses__())}
)


def run_validity(lines: Iterable[str], threshold: float) -> dict[str, Any]:
    """A run's LLM calls, how many failed or were repairs, its decisions lost to a backend
    error (`backend_errors`, see the module docstring), their share of calls and lost decisions
    together and whether the run is valid (share at most `threshold`); every call counts, from
    the cache or not.

    lines: the run's event log lines (checked); threshold: the largest share still valid."""
    calls = failed = repaired = errors = 0
    for line in lines:
        # only lines that can be these events are parsed; matched by content, not by how the
        # line begins, so a log written with other spacing (a colleague's tool) counts the same
        if "llm_call" not in line and "invalid_action" not in line:
            continue
        d = json.loads(line)
        kind = d.get("kind") if isinstance(d, dict) else None
        if kind == "llm_call":
            calls += 1
            failed += d.get("error") is not None
            repaired += bool(d.get("repair"))
        elif kind == "invalid_action":
            value = d.get("value")
            counted = isinstance(value, str) and value in COUNTED_BY_CALLS
            errors += d.get("field") == BACKEND_FIELD and not counted
    total = calls + errors
    share = (failed + repaired + errors) / total if total else 0.0
    return {
        "llm_calls": calls,
        "failed_calls": failed,
        "repaired_calls": repaired,
        "backend_errors": errors,
        "failed_or_repaired_share": round(share, 4),
        "threshold": threshold,
        "valid": share <= threshold,
    }


def invalid_reason(validity: Mapping[str, Any]) -> str | None:
    """Why a run is invalid, in one line (None when it is valid). validity: `run_validity`'s
    result."""
    if validity["valid"]:
        return None
    errors = validity.get("backend_errors") or 0
    also = f", {errors} more decisions lost to a backend error" if errors else ""
    return (
        f"{validity['failed_or_repaired_share']:.1%} of its {validity['llm_calls']} LLM calls "
        f"failed or were repairs{also} (more than {validity['threshold']:.0%})"
    )


def recorded_threshold(meta: Mapping[str, Any], default: float = INVALID_SHARE) -> float:
    """The threshold a run's meta.json records (its study's `failures.invalid_share`), else
    `default`. meta: the parsed meta.json; default: used when none is recorded, or what is
    recorded is not a number from 0 to MAX_INVALID_SHARE."""
    v = meta.get("validity")
    t = v.get("threshold") if isinstance(v, Mapping) else None
    if isinstance(t, int | float) and not isinstance(t, bool) and 0 <= t <= MAX_INVALID_SHARE:
        return float(t)
    return default
