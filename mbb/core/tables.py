"""Events -> tidy polars tables (and parquet). Every table carries `run_id`.

Tables are built per event kind straight from the JSON lines (polars parses them in Rust), so
building them never re-validates or re-parses the whole log in Python. The schemas are fixed
here, so tables from different runs and conditions always concatenate.
"""

from __future__ import annotations

import errno
import functools
import io
import json
import os
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import polars as pl
from polars.datatypes import DataType, DataTypeClass

from mbb.core.eventlog import EventLog, EventLogError, folder_problem, kind_of, read_lines
from mbb.core.nested import comparable_params, first_difference

__all__ = [
    "TABLES",
    "concat_tables",
    "load_tables",
    "tables_from_checked",
    "tables_from_lines",
    "tables_from_log",
    "tables_from_run_dirs",
    "write_tables",
]

_STR, _INT, _F, _B = pl.String, pl.Int64, pl.Float64, pl.Boolean
_BASE = {"run_id": _STR, "seq": _INT, "t": _F, "subrun": _INT, "round": _INT, "worker": _STR}
_INTENT = pl.Struct({"kind": _STR, "peer": _STR, "rule": _STR, "commitment": _STR, "value": _F})

# kind -> extra columns (beyond _BASE)
# a column dtype as polars accepts it in a schema: an instance (List(String)) or a class (Int64)
PolarsDataType = DataType | DataTypeClass

_KIND_SCHEMAS: dict[str, dict[str, PolarsDataType]] = {
    "round_started": {"candidates": pl.List(_STR)},
    "declared": {
        "bid": _INT,
        "duration": _INT,
        "position": _INT,
        "note": _STR,
        "labels": pl.List(_STR),
        "intents": pl.List(_INTENT),
        "revision": _B,
        "turn": _INT,
    },
    "message": {
        "to": _STR,
        "text": _STR,
        "turn": _INT,
        "labels": pl.List(_STR),
        "intents": pl.List(_INTENT),
    },
    "ballot": {
        "ranking": pl.List(_STR),
        "allocations": pl.List(_INT),
        "reasoning": _STR,
        "labels": pl.List(_STR),
        "intents": pl.List(_INTENT),
        "defaulted": _B,
    },
    "schedule_published": {
        "rule": _STR,
        "order": pl.List(_STR),
        "allocations": pl.List(_INT),
        "bids": pl.List(_INT),
        "ballots_unanimous": _B,
    },
    "window_started": {"position": _INT, "allocation": _INT, "price": _INT},
    "window_ended": {
        "position": _INT,
        "start": _F,
        "used": _F,
        "allocation": _INT,
        "reason": _STR,
        "progress": _F,
    },
    "window_dropped": {"position": _INT, "allocation": _INT, "reason": _STR},
    "payment": {"amount": _INT, "balance": _INT, "rule": _STR},
    "evaluation": {
        "task": _STR,
        "score": _F,
        "passed": _INT,
        "total": _INT,
        "resolved": _B,
        "almost_resolved": _B,
        "progress": _F,
        "outcome": _STR,
    },
    "requested": {"duration": _INT},
    "withdrawn": {"reason": _STR},
    "terminated": {"deadline_s": _F, "progress": _F},
    "completed": {"work_s": _F},
    "invalid_action": {"phase": _STR, "field": _STR, "rule": _STR, "detail": _STR},
    "scratch_written": {"entry": _STR, "text": _STR, "dropped_chars": _INT, "accepted": _B},
    "subrun_started": {
        "workers": pl.List(
            pl.Struct(
                {
                    "worker": _STR,
                    "task": _STR,
                    "work_s": _F,
                    "budget": _INT,
                    "deadline_s": _F,
                    "scratch_chars": _INT,
                }
            )
        )
    },
    "subrun_ended": {"rounds": _INT, "reason": _STR},
    "llm_call": {
        "role": _STR,
        "phase": _STR,
        "model": _STR,
        "prompt_tokens": _INT,
        "completion_tokens": _INT,
        "reasoning_tokens": _INT,
        "cached_tokens": _INT,
        "latency_s": _F,
        "attempts": _INT,
        "cache_hit": _B,
        "cost_usd": _F,
        "repair": _B,
        "error": _STR,
        "served_model": _STR,
        "usage_implausible": _B,
    },
    "command": {
        "tool": _STR,
        "command": _STR,
        "exit_code": _INT,
        "runtime": _F,
        "stdout_bytes": _INT,
        "stderr_bytes": _INT,
        "truncated": _B,
        "killed": _B,
        "refused": _B,
        "reason": _STR,
    },
}

TABLES = (
    "rounds",
    "declarations",
    "messages",
    "ballots",
    "windows",
    "payments",
    "evaluations",
    "subrun_workers",
    "requests",
    "withdrawals",
    "terminations",
    "invalid_actions",
    "scratch",
    "llm_calls",
    "commands",
)


def _frame(kind: str, lines: Sequence[str]) -> pl.DataFrame:
    schema = {**_BASE, **_KIND_SCHEMAS[kind]}
    if not lines:
        return pl.DataFrame(schema=schema)
    data = ("\n".join(lines)).encode()
    return pl.read_ndjson(io.BytesIO(data), schema=schema)


def tables_from_lines(by_kind: Mapping[str, Sequence[str]]) -> dict[str, pl.DataFrame]:
    """Build every table from event lines grouped by kind."""
    f = {k: _frame(k, by_kind.get(k, ())) for k in _KIND_SCHEMAS}
    started = f["round_started"].select(
        "run_id",
        "subrun",
        "round",
        "candidates",
        pl.col("candidates").list.len().alias("n_candidates"),
    )
    rounds = (
        f["schedule_published"]
        .drop("seq", "worker")
        .join(started, on=["run_id", "subrun", "round"], how="left")
    )
    ended = f["window_ended"].with_columns(
        (pl.col("start") + pl.col("used")).alias("end"), pl.lit("ran").alias("status")
    )
    prices = f["window_started"].select("run_id", "subrun", "round", "worker", "position", "price")
    ran = ended.join(prices, on=["run_id", "subrun", "round", "worker", "position"], how="left")
    dropped = f["window_dropped"].with_columns(pl.lit("dropped").alias("status"))
    windows = pl.concat([ran.drop("seq"), dropped.drop("seq")], how="diagonal_relaxed").sort(
        "run_id", "subrun", "round", "position"
    )
    workers = f["subrun_started"].select("run_id", "subrun", "workers").explode("workers")
    workers = workers.unnest("workers")
    return {
        "rounds": rounds,
        "declarations": f["declared"],
        "messages": f["message"],
        "ballots": f["ballot"],
        "windows": windows,
        "payments": f["payment"],
        "evaluations": f["evaluation"],
        "subrun_workers": workers,
        "requests": f["requested"],
        "withdrawals": f["withdrawn"],
        "terminations": f["terminated"],
        "invalid_actions": f["invalid_action"],
        "scratch": f["scratch_written"],
        "llm_calls": f["llm_call"],
        "commands": f["command"],
    }


def tables_from_log(log: EventLog) -> dict[str, pl.DataFrame]:
    return tables_from_lines(log.by_kind)


def _group(lines: Iterable[str], into: dict[str, list[str]]) -> None:
    for line in lines:
        into[kind_of(line)].append(line)


def tables_from_run_dirs(run_dirs: Iterable[str | Path]) -> dict[str, pl.DataFrame]:
    """Tables of many runs at once (one parse per kind across all runs). Every log is checked
    (`read_lines`); a run found twice (a copied folder), a folder not named by its log's run
    (`folder_problem`) or runs of two conditions are refused, not counted together."""
    return tables_from_checked(_named_by_their_runs(run_dirs))


def _named_by_their_runs(run_dirs: Iterable[str | Path]) -> Iterator[tuple[Path, list[str]]]:
    """(log, its checked lines) of each run folder, refused (EventLogError) when the folder is
    not named by its log's run id (`folder_problem`, `load_runs`'s rule too)."""
    for d in run_dirs:
        log = Path(d) / "events.jsonl"
        lines = read_lines(log)
        if lines:
            why = folder_problem(d, json.loads(lines[0])["run_id"])
            if why is not None:
                raise EventLogError(f"{log}: {why}")
        yield log, lines


def tables_from_checked(logs: Iterable[tuple[Path, Sequence[str]]]) -> dict[str, pl.DataFrame]:
    """`tables_from_run_dirs` for logs already read by `read_lines`: (path, its lines) each,
    so a reader that checked them (`mbb.analysis.load_runs`) does not parse them twice."""
    by_kind: dict[str, list[str]] = defaultdict(list)
    seen: dict[str, Path] = {}
    condition: tuple[Path, dict] | None = None
    for path, lines in logs:
        if lines:
            first = json.loads(lines[0])
            rid = first["run_id"]
            if rid in seen:
                raise EventLogError(f"{path}: run {rid!r} is also in {seen[rid]} (a copy?)")
            seen[rid] = path
            if first.get("kind") == "run_started":
                # the same condition whatever the endpoint's address or the cache (a stub
                # study resumed on another port made runs its tables then refused)
                mine = comparable_params(first["params"])
                if condition is None:
                    condition = (path, first)
                elif mine != (theirs := comparable_params(condition[1]["params"])):
                    old = condition[1]
                    diff = first_difference(theirs, mine, (f"in {old['run_id']}", f"in {rid}"))
                    raise EventLogError(
                        f"{path}: a run of condition {first['condition']!r} beside runs of "
                        f"{old['condition']!r} ({diff}); tables never mix conditions"
                    )
        _group(lines, by_kind)
    return tables_from_lines(by_kind)


def concat_tables(parts: Sequence[Mapping[str, pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    return (
        {name: pl.concat([p[name] for p in parts], how="diagonal_relaxed") for name in TABLES}
        if parts
        else tables_from_lines({})
    )


def write_tables(tables: Mapping[str, pl.DataFrame], out_dir: Path) -> list[Path]:
    """Write each table to `out_dir/<name>.parquet`, never through a symbolic link (output
    folders are shared: a link planted as `tables` or as one of its files would point the write
    elsewhere). Each file is written beside, then renamed over its name."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if out_dir.is_symlink():
        raise OSError(
            errno.ELOOP,
            "a symbolic link; tables are written only into a folder of their own",
            str(out_dir),
        )
    paths = []
    for name, df in tables.items():
        p = out_dir / f"{name}.parquet"
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".parquet", dir=out_dir)
        os.close(fd)
        try:
            df.write_parquet(tmp)
            os.replace(tmp, p)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        paths.append(p)
    return paths


@functools.cache
def _written_schemas() -> dict[str, pl.Schema]:
    """The schema of each table as mbb writes it (the tables of no events)."""
    return {name: df.schema for name, df in tables_from_lines({}).items()}


def load_tables(tables_dir: str | Path, names: Iterable[str] = TABLES) -> dict[str, pl.DataFrame]:
    """The parquet tables in `tables_dir` (a path or a str; a condition folder is taken to mean
    its `tables/`), each checked to have the columns and types mbb writes (a one-line
    ValueError otherwise, never a polars error deep in an analysis).

    They are read as they are: a folder's tables are a cache of its logs that anyone who had
    the folder could have rewritten, so analyses of runs from elsewhere read the logs
    (`mbb.analysis.load_runs`, which checks every event); these are for your own outputs."""
    tables_dir = Path(tables_dir)
    if not (tables_dir / "rounds.parquet").is_file() and (tables_dir / "tables").is_dir():
        tables_dir = tables_dir / "tables"
    names = list(names)
    missing = [n for n in names if not (tables_dir / f"{n}.parquet").is_file()]
    if missing:
        raise FileNotFoundError(
            f"{tables_dir}: no table {missing[0]}.parquet here (`mbb tables DIR` derives them "
            "from the runs' events)"
        )
    written = _written_schemas()
    out = {}
    for n in names:
        path = tables_dir / f"{n}.parquet"
        try:
            df = pl.read_parquet(path)
        except (OSError, pl.exceptions.PolarsError) as exc:
            raise ValueError(f"{path}: not a parquet table ({type(exc).__name__})") from None
        want = written.get(n)
        if want is not None and df.schema != want:
            bad = next(
                (
                    f"column {c!r} is {df.schema.get(c)}, mbb writes {t}"
                    for c, t in want.items()
                    if df.schema.get(c) != t
                ),
                f"columns {list(df.columns)}, mbb writes {list(want)}",
            )
            raise ValueError(
                f"{path}: not a table as mbb writes it ({bad}); derive the tables again from "
                "the runs' events with `mbb tables DIR`"
            )
        out[n] = df
    return out
