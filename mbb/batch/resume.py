"""Continue a run that was killed (SIGKILL included) from its event log — the log is the
checkpoint. Scripted randomness is re-derived from the seed, LLM calls come from the cache, and
the events already recorded are verified rather than written again.

A run folder is data, never a command: folders are shared between researchers, and a forged
`run_started` line could otherwise choose the endpoint a key is sent to, the environment variable
read as the key, or where files are written. So the condition comes from the user:

- `resume_run(run_dir, condition)`: the user's condition (`mbb resume DIR --params P`), checked
  against the one recorded in the log; any difference is refused, naming the first differing
  field. Endpoints, key variables and the cache file are then the user's own.
- `resume_run(run_dir, trust_folder=True, key_envs=...)`: the recorded condition, taken because
  the user said so (`--trust-folder`). Even then the folder does not choose what is read or
  written outside it: each key variable it names must be one the user names (`--key-env`), and
  its LLM cache file must lie inside the output folder.

Everything written goes inside the run folder and its output folder, never through a symbolic
link planted there (`mbb.core.eventlog.EventLog`, `write_meta`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from mbb.agents.backends import uses_llm
from mbb.batch.build import ensure_condition, run_condition
from mbb.batch.outdir import claim, replace_file
from mbb.batch.runner import write_meta
from mbb.batch.runs import run_id_of
from mbb.core.eventlog import EventLogError, read_lines
from mbb.core.nested import first_difference
from mbb.params import Condition, ParamsError

__all__ = ["ResumeOutcome", "ResumeRefused", "resume_run"]


class ResumeRefused(ValueError):
    """The run is not resumed: no condition of the user's, a condition that differs from the
    recorded one, or a recorded condition that would read or write outside the folder."""


@dataclass(frozen=True)
class ResumeOutcome:
    run_id: str
    status: str  # "finished" (nothing to do) | "resumed"
    recorded: int  # complete events found in the log
    total: int  # events in the log afterwards


def _recorded_condition(path: Path, params: dict) -> Condition:
    try:
        return Condition.model_validate(params)
    except ValidationError:
        raise EventLogError(f"{path}:1: the recorded params are not a valid condition") from None


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def _check_trusted(condition: Condition, key_envs: Iterable[str], out_dir: Path) -> None:
    """What a trusted folder's condition may still not choose: a key variable the user did not
    name, an LLM cache file outside the output folder."""
    allowed = set(key_envs)
    used = {s.model for s in condition.worker_specs() if s.model is not None}
    for name, model in sorted(condition.models.items()):
        if name not in used or not uses_llm(condition):
            continue  # a config no worker calls: its variable is never read
        if model.api_key_env is not None and model.api_key_env not in allowed:
            raise ResumeRefused(
                f"the folder's model {name!r} ({model.base_url}) reads its key from environment "
                f"variable {model.api_key_env}: mbb reads only the key variables you name; add "
                f"--key-env {model.api_key_env} to send that key to that endpoint, or resume "
                "with --params (your own params file)"
            )
    if uses_llm(condition) and condition.llm.cache != "off":
        cache = condition.llm.cache_path()
        if not _inside(cache, out_dir):
            raise ResumeRefused(
                f"the folder's params keep LLM answers in {cache}, outside the output folder "
                f"{out_dir}: resume with --params (your own params file names your cache)"
            )


def _no_link(path: Path) -> None:
    if path.is_symlink():
        raise ResumeRefused(
            f"{path}: a symbolic link; mbb reads and writes a run's files only inside its folder"
        )


def resume_run(
    run_dir: str | Path,
    condition: Condition | None = None,
    *,
    trust_folder: bool = False,
    key_envs: Iterable[str] = (),
) -> ResumeOutcome:
    """Finish the run in `run_dir`; a run that already finished is left untouched.

    `condition`: the user's condition (it must equal the recorded one); `trust_folder`: take
    the recorded condition instead (then `key_envs` are the key variables it may read). One of
    the two is required (see the module docstring)."""
    run_dir = Path(run_dir)
    path = run_dir / "events.jsonl"
    if condition is None and not trust_folder:
        raise ResumeRefused(
            f"{run_dir}: mbb resume takes the condition from your params, not from the folder: "
            "give --params FILE (with the --set and --model of the original command), or "
            "--trust-folder to run the params recorded there"
        )
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir}: no events.jsonl to resume from")
    for p in (path, run_dir / "meta.json", run_dir / "resource"):
        _no_link(p)
    lines = read_lines(path)  # the strict parser: every line one valid event, seq 0.., one run
    if not lines:
        raise ValueError(f"{path}: no complete event recorded; start the run again instead")
    first = json.loads(lines[0])
    if first["kind"] != "run_started":
        raise EventLogError(f"{path}:1: the first event is {first['kind']!r}, not run_started")
    if run_dir.name != first["run_id"]:
        raise ValueError(f"{run_dir}: folder name differs from the run id {first['run_id']!r}")
    recorded = _recorded_condition(path, first["params"])
    if condition is None:
        condition = recorded
        try:
            ensure_condition(condition, f"{path}:1")
        except ParamsError as exc:
            raise EventLogError(str(exc)) from None
        _check_trusted(condition, key_envs, run_dir.parent)
    else:
        mine = condition.model_dump(mode="json")
        if mine != first["params"]:
            diff = first_difference(first["params"], mine, ("in the log", "in your params"))
            raise ResumeRefused(
                f"{run_dir}: your params differ from the run's ({diff}); resume with the params "
                "(and --set, --model) that started it"
            )
    seed = first["seed"]
    if run_id_of(condition, seed) != run_dir.name:
        raise ResumeRefused(
            f"{run_dir}: seed {seed} of condition {condition.name!r} is run "
            f"{run_id_of(condition, seed)!r}, not this folder"
        )
    with claim(run_dir.parent, condition):
        last = json.loads(lines[-1])
        if last["kind"] == "run_ended" and last["status"] == "completed":
            return ResumeOutcome(first["run_id"], "finished", len(lines), len(lines))
        if last["kind"] == "run_ended":
            # a run that failed is retried from just before its failure record
            lines = lines[:-1]
            replace_file(path, "".join(x + "\n" for x in lines))
        t0 = time.perf_counter()
        result = run_condition(condition, seed, run_dir.parent, resume=True)
        write_meta(result, condition, time.perf_counter() - t0)
    return ResumeOutcome(first["run_id"], "resumed", len(lines), len(result.log.lines))
