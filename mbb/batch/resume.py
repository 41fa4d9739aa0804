"""Continue a run that was killed (SIGKILL included) from its event log — the log is the
checkpoint. Scripted randomness is re-derived from the seed, LLM calls come from the cache, and
the events already recorded are verified rather than written again."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from mbb.batch.build import run_condition
from mbb.batch.outdir import claim
from mbb.batch.runner import write_meta
from mbb.core.eventlog import EventLogError, read_lines
from mbb.core.events import EVENT_ADAPTER
from mbb.params import Condition

__all__ = ["ResumeOutcome", "resume_run"]


@dataclass(frozen=True)
class ResumeOutcome:
    run_id: str
    status: str  # "finished" (nothing to do) | "resumed"
    recorded: int  # complete events found in the log
    total: int  # events in the log afterwards


def resume_run(run_dir: str | Path) -> ResumeOutcome:
    """Finish the run in `run_dir`; a run that already finished is left untouched."""
    run_dir = Path(run_dir)
    path = run_dir / "events.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir}: no events.jsonl to resume from")
    lines = read_lines(path)  # checks every line: JSON, kind, seq 0.., one run id
    if not lines:
        raise ValueError(f"{path}: no complete event recorded; start the run again instead")
    first = json.loads(lines[0])
    if first["kind"] != "run_started":
        raise EventLogError(f"{path}:1: the first event is {first['kind']!r}, not run_started")
    if run_dir.name != first["run_id"]:
        raise ValueError(f"{run_dir}: folder name differs from the run id {first['run_id']!r}")
    try:
        condition = Condition.model_validate(first["params"])
    except ValidationError:
        raise EventLogError(f"{path}:1: the recorded params are not a valid condition") from None
    with claim(run_dir.parent, condition):
        last = json.loads(lines[-1])
        if last["kind"] == "run_ended" and last["status"] == "completed":
            # finished: every event is validated against its model, not only its envelope
            for i, line in enumerate(lines):
                try:
                    EVENT_ADAPTER.validate_json(line)
                except ValidationError as exc:
                    err = exc.errors()[0]
                    loc = ".".join(str(p) for p in err["loc"][1:]) or "(event)"
                    raise EventLogError(f"{path}:{i + 1}: {loc}: {err['msg']}") from None
            return ResumeOutcome(first["run_id"], "finished", len(lines), len(lines))
        if last["kind"] == "run_ended":
            # a run that failed is retried from just before its failure record
            lines = lines[:-1]
            path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
        t0 = time.perf_counter()
        result = run_condition(condition, first["seed"], run_dir.parent, resume=True)
        write_meta(result, condition, time.perf_counter() - t0)
    return ResumeOutcome(first["run_id"], "resumed", len(lines), len(result.log.lines))
