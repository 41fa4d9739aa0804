"""Reading runs that exist, for every analysis: a study, a sweep, a condition's folder or one
run folder, never running anything.

A run's *cell* is its run id without the seed (`base-seed0003` → `base`;
`base.negotiators-glm-seed0003` → `base.negotiators-glm`): a condition, with the model when its
workers are LLMs. It is the `condition` every analysis groups by, so runs of one condition on
two models are never pooled. Runs that did not finish (stopped, failed, being written) are left
out, and so are runs marked invalid (more failed or repaired LLM calls than their study
allows, `meta.json`'s `validity`) unless asked for; `excluded` says which and why.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import ValidationError

from mbb.analysis._frames import run_info_from_dirs
from mbb.core import safejson
from mbb.core.errors import for_terminal
from mbb.core.eventlog import MAX_LINE_CHARS, EventLogError, folder_problem, read_lines
from mbb.core.paths import user_path
from mbb.core.tables import concat_tables, tables_from_checked
from mbb.core.validity import invalid_reason, recorded_threshold, run_validity
from mbb.params import Condition, ParamsError

__all__ = [
    "baseline_cell",
    "cell_of",
    "cells_of",
    "checked_log",
    "condition_part",
    "excluded_note",
    "find_run_dirs",
    "load_runs",
    "read_meta",
    "recorded_conditions",
    "run_status",
    "selected_runs",
    "valid_only",
]

_SEED = re.compile(r"-seed\d+$")
_CONDITION = re.compile(r"^([^.-]+)(.*)$")  # a cell: its condition, then `.<role>` / `-<model>`
# folders mbb writes beside runs that never hold runs of their own
_NOT_RUNS = frozenset({"viewer", "notebooks", "tables", "resource", "__pycache__"})


def cell_of(run_id: str) -> str:
    """The run id without its seed: the condition (and model) a run belongs to."""
    return _SEED.sub("", run_id)


def find_run_dirs(paths: Iterable[str | Path], exclude: Iterable[str | Path] = ()) -> list[Path]:
    """Every run folder (one holding `events.jsonl`) under `paths`, sorted; a path may be one
    itself. Nothing beneath a run folder (its workspaces) is visited, nor the folders mbb writes
    beside runs (`viewer/`, `notebooks/`, `tables/`, ...), nor hidden ones, nor `exclude`. A run
    folder that is a symbolic link is found, never walked into (`run_status` refuses it). A
    folder named `events.jsonl` makes its parent a run folder (listed, refused when read). A
    path that does not exist is an error.

    `paths`: the folders to search; `exclude`: folders not searched (a viewer's own output)."""
    skip = {user_path(p).resolve() for p in exclude}
    found: set[Path] = set()
    for p in paths:
        root = user_path(p)
        if not root.exists():
            raise FileNotFoundError(f"{root}: no such folder")
        root = root.resolve() if root.is_symlink() else root  # a link you name is followed
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            here = Path(dirpath)
            if "events.jsonl" in filenames or "events.jsonl" in dirnames:
                found.add(here)
                dirnames[:] = []
                continue
            dirnames[:] = sorted(
                d
                for d in dirnames
                if d not in _NOT_RUNS and d[0] != "." and (here / d).resolve() not in skip
            )
            found.update(
                here / d
                for d in dirnames
                if (here / d).is_symlink() and os.path.lexists(here / d / "events.jsonl")
            )
    return sorted(found)


def _shown(names: Iterable[str]) -> str:
    """Folder names for a one-line message, their control characters written out (a name from
    a colleague's folder may hold an escape sequence or a newline), as the CLI writes its own."""
    return for_terminal(", ".join(names), one_line=True)


def in_condition(cell: str, condition: str) -> bool:
    """Whether `cell` is `condition` or one of its cells (`base` holds `base`,
    `base.negotiators-glm` and `base-<variant>`)."""
    return cell == condition or cell.startswith((f"{condition}.", f"{condition}-"))


def selected_runs(runs: Sequence[Path], conditions: Sequence[str] | None) -> list[Path]:
    """The runs among `runs` whose cell is in one of `conditions` (all when None). A name that
    matches no run is an error naming the cells found: a misspelled name would otherwise drop
    a condition without a word.

    runs: run folders (`find_run_dirs`); conditions: cells or condition names."""
    if conditions is None:
        return list(runs)
    cells = sorted({cell_of(r.name) for r in runs})
    unmatched = [c for c in conditions if not any(in_condition(cell, c) for cell in cells)]
    if unmatched:
        raise ValueError(
            f"conditions: {', '.join(map(repr, unmatched))} match no run; the runs found "
            f"are of: {_shown(cells)}"
        )
    return [r for r in runs if any(in_condition(cell_of(r.name), c) for c in conditions)]


def run_status(run_dir: Path) -> tuple[bool, str | None]:
    """(usable, why not): a run is usable when its log ends with a completed `run_ended` and
    it is valid: no larger share of failed or repaired LLM calls in its log than the threshold
    its meta.json records (else mbb's), and not marked invalid in its meta.json (which can make
    a run less valid, never more). Its folder is named by its run id (the cell it is counted
    in comes from the name)."""
    ok, why, _lines = checked_log(run_dir)
    return ok, why


# the characters of a run's id (a mechanism replay's `~<mechanism>` is no run to analyse)
_RUN_ID = re.compile(r"[A-Za-z0-9_.-]+")


# why a run folder found as a link is not read (it could point at any folder of the reader's)
LINKED_RUN = "a symbolic link to a folder elsewhere: not read"


def checked_log(run_dir: Path) -> tuple[bool, str | None, list[str]]:
    """`run_status`, and the log's lines as `read_lines` checked them (empty when not usable),
    for a reader that then builds tables from them (`tables_from_checked`) without parsing the
    log again.

    run_dir: the run folder."""
    if run_dir.is_symlink():
        return False, LINKED_RUN, []
    try:
        lines = read_lines(run_dir / "events.jsonl")
    except EventLogError as exc:
        return False, f"log does not check: {exc}", []
    if not lines or not lines[-1].startswith('{"kind":"run_ended"'):
        return False, "not finished", []
    last = json.loads(lines[-1])
    why = folder_problem(run_dir, last["run_id"])  # `mbb tables`' and the viewer's rule too
    if why is None and not _RUN_ID.fullmatch(run_dir.name):
        why = f"run id {run_dir.name[:60]!r} is a mechanism replay's, not a run's"
    if why is not None:
        return False, why, []
    status = last.get("status")
    if status != "completed":
        return False, f"run {status}", []
    meta = read_meta(run_dir)
    why = invalid_reason(run_validity(lines, recorded_threshold(meta)))
    if why is not None:
        return False, f"invalid: {why}", lines
    if meta.get("valid") is False:
        why = meta.get("invalid_reason")
        return False, f"invalid: {why if isinstance(why, str) else 'marked in meta.json'}", lines
    return True, None, lines


def load_runs(
    paths: Iterable[str | Path],
    *,
    conditions: Sequence[str] | None = None,
    include_invalid: bool = False,
) -> dict[str, pl.DataFrame]:
    """The tables of every finished run under `paths`, with `condition` (the run's cell) in
    each, `runs` (with `valid` and `invalid_reason`, as `run_status` judges the run, and
    `bad_call_share`, the share of failed or repaired LLM calls) and `workers`
    (`mbb.analysis.with_run_info`), and `excluded` (run_id, cell, reason: unfinished, failed,
    stopped or invalid runs left out).

    paths: run folders, condition folders, sweeps or studies; conditions: keep only these
    cells (a cell, or a condition name that its cells start with, e.g. `base` keeps `base` and
    `base.negotiators-glm`; a name that matches no run is an error); include_invalid: keep runs
    marked invalid."""
    found = find_run_dirs(paths)
    if not found:
        raise FileNotFoundError(
            f"no runs (events.jsonl) under {', '.join(str(user_path(p)) for p in paths)}"
        )
    by_cell: dict[str, list[Path]] = defaultdict(list)
    checked: dict[Path, list[str]] = {}  # each usable run's lines, read and checked once
    invalid: dict[str, str] = {}  # the invalid runs kept (include_invalid): why each is
    excluded = []
    for run in selected_runs(found, conditions):
        cell = cell_of(run.name)
        ok, why, lines = checked_log(run)
        if not ok and not (include_invalid and why is not None and why.startswith("invalid")):
            excluded.append((run.name, cell, why or ""))
            continue
        if why is not None:
            invalid[run.name] = why
        by_cell[cell].append(run)
        checked[run] = lines
    if not by_cell:
        names = _shown(sorted({cell_of(r.name) for r in found}))
        reasons: dict[str, int] = defaultdict(int)
        for _, _, why in excluded:
            reasons[why.split(":", 1)[0].split(" (", 1)[0] or "unfinished"] += 1
        left_out = "; ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
        hint = (
            " (include_invalid=True reads the invalid ones, marked so)"
            if any(why.startswith("invalid") for why in reasons)
            else ""
        )
        raise ValueError(
            f"no run to analyse (conditions={conditions}); the runs found are of: {names}"
            + (f"; left out: {left_out}{hint}" if left_out else "")
        )
    parts = []
    for cell, runs in sorted(by_cell.items()):
        # from the logs, never from a folder's parquet tables (a colleague's folder could hold
        # tables that say something else than its logs)
        tables = tables_from_checked((r / "events.jsonl", checked.pop(r)) for r in runs)
        parts.append(
            {n: t.with_columns(pl.lit(cell).alias("condition")) for n, t in tables.items()}
        )
    out = concat_tables(parts)
    runs_df, workers = run_info_from_dirs([r for rs in by_cell.values() for r in rs])
    out["runs"] = runs_df.with_columns(
        pl.col("condition").alias("condition_name"),
        pl.col("run_id").str.replace(r"-seed\d+$", "").alias("condition"),
    )
    out["runs"] = out["runs"].join(
        _validity(out.get("llm_calls"), [r for rs in by_cell.values() for r in rs], invalid),
        on="run_id",
        how="left",
    )
    out["workers"] = workers
    out["excluded"] = pl.DataFrame(excluded, schema=["run_id", "cell", "reason"], orient="row")
    return out


def _validity(
    calls: pl.DataFrame | None, runs: Sequence[Path], invalid: Mapping[str, str]
) -> pl.DataFrame:
    """run_id, valid, invalid_reason, bad_call_share: `valid` and its reason are
    `checked_log`'s verdict (`invalid`: run id -> why, for the invalid runs kept), one rule for
    every reader; `bad_call_share` is the share of the run's logged LLM calls that failed or
    were repairs (null for a run without LLM calls)."""
    share: dict[str, float] = {}
    if calls is not None and not calls.is_empty():
        per = calls.group_by("run_id").agg(
            ((pl.col("error").is_not_null() | pl.col("repair").fill_null(False)).mean()).alias(
                "share"
            )
        )
        share = dict(per.iter_rows())
    rows = [
        (run.name, run.name not in invalid, invalid.get(run.name), share.get(run.name))
        for run in runs
    ]
    schema = {
        "run_id": pl.String,
        "valid": pl.Boolean,
        "invalid_reason": pl.String,
        "bad_call_share": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def valid_only(tables: Mapping[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """`load_runs(..., include_invalid=True)`'s tables cut to the valid runs, the invalid ones
    moved to `excluded` with their reason: what `load_runs` without invalid runs returns, from
    one reading of the logs (a reader that needs both, e.g. a report's comparison and its
    spend, parses each log once).

    tables: `load_runs`'s tables."""
    runs = tables["runs"]
    keep = runs.filter(pl.col("valid"))["run_id"].to_list()
    dropped = runs.filter(~pl.col("valid")).select(
        "run_id", pl.col("condition").alias("cell"), pl.col("invalid_reason").alias("reason")
    )
    out = {
        name: t.filter(pl.col("run_id").is_in(keep)) if "run_id" in t.columns else t
        for name, t in tables.items()
        if name != "excluded"
    }
    out["excluded"] = pl.concat([tables["excluded"], dropped], how="vertical_relaxed")
    return out


def read_meta(run_dir: Path) -> dict[str, Any]:
    """A run's meta.json, or {} when missing, a link (it could point anywhere), a pipe or not
    an object (`safejson.read_object`). One larger than any mbb writes is not read: the run is
    then marked invalid with the reason (meta.json may mark a run invalid, so an unread one
    cannot leave it valid); every reader (`load_runs`, the viewer) judges it so.

    run_dir: the run folder."""
    path = run_dir / "meta.json"
    try:
        return safejson.read_object(path) or {}
    except safejson.TooLarge as exc:
        return {"valid": False, "invalid_reason": f"meta.json {str(exc).removeprefix(f'{path}: ')}"}


def excluded_note(tables: dict[str, pl.DataFrame]) -> None:
    """Say, in one line per kind of reason, which runs `load_runs` left out (nothing when
    none): the kind is the reason up to its colon ("invalid", "log does not check"), with one
    run and its whole reason as the example (a line per run said the same thing 50 times for
    50 invalid runs, each with its own share of failed calls).

    tables: `load_runs`' tables, or any dict whose `excluded` has run_id and reason."""
    ex = tables.get("excluded")
    if ex is None or ex.is_empty():
        return
    kind = pl.col("reason").str.split(":").list.first().str.strip_chars()
    counts = (
        ex.with_columns(kind.alias("kind"))
        .group_by("kind", maintain_order=True)
        .agg(pl.len().alias("n"), pl.col("run_id").first(), pl.col("reason").first())
    )
    for r in counts.sort("n", descending=True, maintain_order=True).iter_rows(named=True):
        detail = f": {r['reason'].split(':', 1)[1].strip()}" if ":" in r["reason"] else ""
        said = f"left out {r['n']} run(s): {r['kind'] or 'unfinished'} (e.g. {r['run_id']}{detail})"
        print(for_terminal(said, one_line=True))


def cells_of(tables: dict[str, pl.DataFrame]) -> dict[str, dict[str, pl.DataFrame]]:
    """`load_runs`'s tables split by cell (its `condition` column): one set of tables per
    condition-and-model, for measures that compare two cells run by run."""
    runs = tables["runs"]
    out: dict[str, dict[str, pl.DataFrame]] = {}
    for cell in sorted(runs["condition"].unique().to_list()):
        ids = runs.filter(pl.col("condition") == cell)["run_id"]
        out[cell] = {
            name: t.filter(pl.col("run_id").is_in(ids.to_list())) if "run_id" in t.columns else t
            for name, t in tables.items()
        }
    return out


def baseline_cell(cell: str, baseline: str = "base") -> str:
    """The cell of `baseline` with the same role and model as `cell`
    (`urgent_worker.negotiators-glm` → `base.negotiators-glm`; `urgent_worker` → `base`):
    what a treated cell is paired with."""
    m = _CONDITION.match(cell)
    return baseline + (m.group(2) if m else "")


def condition_part(cell: str) -> str:
    """A cell's condition name (`urgent_worker.negotiators-glm` → `urgent_worker`)."""
    m = _CONDITION.match(cell)
    return m.group(1) if m else cell


def recorded_conditions(
    paths: Iterable[str | Path], conditions: Sequence[str] | None = None
) -> dict[str, Condition]:
    """Each cell's condition as its runs recorded it (the `run_started` params of its first
    run): what its workers were told, without the params file. `paths`, `conditions`: as in
    `load_runs`."""
    out: dict[str, Condition] = {}
    for run in selected_runs(find_run_dirs(paths), conditions):
        cell = cell_of(run.name)
        if cell in out:
            continue
        try:
            with safejson.open_text(run / "events.jsonl", follow_links=False) as fh:
                first = fh.readline(MAX_LINE_CHARS + 1)  # a longer one is no event
            event = safejson.loads(first)
        except (OSError, ValueError):
            continue  # a link, a pipe, not even one complete event: `load_runs` says why
        if not isinstance(event, dict):
            continue  # not an event: as above
        if event.get("kind") == "run_started" and isinstance(event.get("params"), dict):
            try:
                out[cell] = Condition.model_validate_json(json.dumps(event["params"]))
            except ValidationError as exc:
                err = exc.errors(include_url=False)[0]
                where = ".".join(str(x) for x in err["loc"]) or "params"
                raise ParamsError(
                    f"{run / 'events.jsonl'}:1: the recorded params are not a condition this "
                    f"mbb reads ({exc.error_count()} problem(s); first: {where}: {err['msg']})"
                ) from None
    return out
