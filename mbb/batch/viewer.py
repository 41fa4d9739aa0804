"""`mbb view`: a static, offline viewer over every run of a folder.

`build_viewer(root, out)` writes

- `out/index.html`: the page, with its CSS and its (dependency-free) JavaScript inlined;
- `out/data/index.js`: one entry per run: condition, model, seed, status, the per-run measures
  of the runs table (`mbb.analysis.outcome.outcomes` per run, `mbb.batch.study.run_models`, the
  LLM calls' failures, repairs, tokens and cost), validity, problems, and the user's columns;
- `out/data/runs/<n>.js`: one file per run, loaded only when the run is opened;
- `out/data/text/<k>.js`: the text of 200 runs (declarations, messages, ballots, memory,
  commands), loaded only when a search covers every run.

Data files are JavaScript (`MBB.index({...})`, `MBB.run(n, {...})`, `MBB.text(k, {...})`)
loaded by `<script src>`: `fetch()` of a `file://` URL is blocked by browsers, a script tag is
not. The page therefore works from a plain folder (or a zip, or any static web server) with the
network off.

`watch_viewer(root, out)` keeps the viewer up to date while a sweep or a study writes runs into
`root`: every `interval` seconds it re-reads the runs that appeared or changed, rewrites their
files and the index, and the open page (which polls `data/index.js`) shows them. A run still
being written is `running`, never a damaged log: its log has no `run_ended` yet and its folder's
writer lock is held (`.mbb.lock`, see `mbb.batch.outdir`) or the log changed in the last
`RUNNING_S` seconds.

Only mbb's own artefacts are read: a run is a folder holding `events.jsonl` (and its
`meta.json`); nothing beneath a run folder (its `resource/` with the workers' workspaces) is
looked at, and no notebook is read. Everything read is untrusted: each line is read by the
parser the tables use (`mbb.core.eventlog.parse_line`: the event schema strictly, every number
in range, no key given twice, nesting bounded), so the page shows exactly the events the tables
count; a line it refuses (a wrong field type, a `"__proto__"` subrun) is left out with its line
number and the parser's reason; every string written is passed through `redact`; every
piece of text reaches the page as data and is put in with `textContent`, never as HTML.

Bad input never stops the build: a folder with no runs still gets a page saying so; a run whose
log is corrupt, truncated, of another event version or of another run is listed with the reason,
and the runs around it are shown.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
import re
import sqlite3
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mbb.analysis.runs import LINKED_RUN, find_run_dirs, read_meta
from mbb.analysis.tokens import cost_text, known_cost, tokens_text, total_cost, without_usage
from mbb.batch.outdir import OutputError, replace_file
from mbb.core import safejson
from mbb.core.eventlog import (
    EventLogError,
    OtherVersion,
    folder_problem,
    parse_line,
    read_log_bytes,
)
from mbb.core.events import SCHEMA_VERSION
from mbb.core.validity import INVALID_SHARE, recorded_threshold, run_validity
from mbb.llm.cache import schema_problem

__all__ = [
    "RUNNING_S",
    "RunLog",
    "ViewerResult",
    "build_viewer",
    "read_columns",
    "read_run",
    "redact",
    "watch_viewer",
]

STATIC = Path(__file__).resolve().parent / "viewer_static"
_SCRIPTS = ("viewer.js", "runs_table.js", "diff.js", "agent.js")  # inlined in this order
_DROP = ("v", "run_id", "wall", "intents")  # per-event fields the page does not need
_MAX_PROBLEMS = 5  # bad lines reported per run (the rest are counted)
_TEXT_CAP = 20_000  # characters of one prompt / answer shown
_CHUNK = 200  # runs read, labelled and written at a time; also the runs of one text file
COLUMN_FILES = ("viewer-columns.csv", "viewer-columns.json")  # picked up in the folder viewed
"""A run is marked invalid when more than this share of its LLM calls failed or needed a repair
(unless its `meta.json` says `valid` / `invalid_reason` itself)."""
RUNNING_S = 30.0
"""A log without `run_ended` that changed less than this many seconds ago is still being written
(when its folder's writer lock cannot be read)."""


# --- finding and reading runs ----------------------------------------------------------------
def _held_flocks() -> set[str] | None:
    """`maj:min:inode` of every file with a flock held on this machine (Linux `/proc/locks`);
    None where that cannot be read."""
    try:
        text = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    held = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "FLOCK" and "->" not in parts:
            held.add(parts[5].lower())
    return held


def _writer_active(run_dir: Path, held: set[str] | None) -> bool:
    """True when a writer holds the lock of the folder the run is in (`mbb.batch.outdir`)."""
    if held is None:
        return False
    try:
        st = (run_dir.parent / ".mbb.lock").stat()
    except OSError:
        return False
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}" in held


def _being_written(run_dir: Path, held: set[str] | None, now: float | None = None) -> bool:
    """A run (without `run_ended` or meta.json) whose writer is alive, or whose log changed
    in the last `RUNNING_S` seconds."""
    if _writer_active(run_dir, held):
        return True
    try:
        mtime = (run_dir / "events.jsonl").stat().st_mtime
    except OSError:
        return False
    return (time.time() if now is None else now) - mtime < RUNNING_S


@dataclass
class RunLog:
    """One run's log as read by the viewer: its valid events and what was wrong with the rest."""

    path: Path
    lines: list[str] = field(default_factory=list)  # valid event lines, in order
    events: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    fatal: str | None = None  # the run cannot be shown at all (and why)
    running: bool = False  # no run_ended yet, and still being written
    meta: dict[str, Any] = field(default_factory=dict)  # typed fields of meta.json the page uses

    @property
    def run_id(self) -> str:
        if self.events:
            return str(self.events[0].get("run_id", self.path.name))
        return self.path.name


def _read_meta(run_dir: Path) -> dict[str, Any]:
    """`valid` (bool) and `invalid_reason` (str) from meta.json, when present with those types
    (`read_meta`: `load_runs`'s reading, so a meta.json too large to read marks the run invalid
    in both)."""
    meta = read_meta(run_dir)
    out: dict[str, Any] = {}
    if isinstance(meta.get("valid"), bool):
        out["valid"] = meta["valid"]
    if isinstance(meta.get("invalid_reason"), str):
        out["invalid_reason"] = meta["invalid_reason"][:500]
    if isinstance(meta.get("validity"), dict):
        out["validity"] = {"threshold": meta["validity"].get("threshold")}
    return out


_EXACT = 2**53  # the largest integer a JavaScript number holds exactly


def read_run(run_dir: Path, held: set[str] | None = None) -> RunLog:
    """Read `run_dir/events.jsonl` tolerantly: every line that is not a valid mbb event of this
    run and version (`parse_line`, the tables' parser) is reported (file and line number, the
    parser's reason) and left out; the rest is kept, in the writer's form. A run still being
    written (see the module's docstring; `held`: `_held_flocks()`, read once per scan) is
    `running`: its missing end and a partly written last line are not problems."""
    run = RunLog(Path(run_dir))
    path = run.path / "events.jsonl"
    if run.path.is_symlink():  # found under the folder as a link: never read (load_runs's rule)
        run.fatal = LINKED_RUN
        return run
    try:
        raw = read_log_bytes(path)  # the tables' rule: no link, no pipe, at most 1 GiB
    except EventLogError as exc:
        run.fatal = f"events.jsonl: {str(exc).removeprefix(f'{path}: ')}"
        return run
    except OSError as exc:
        run.fatal = f"events.jsonl cannot be read: {exc.strerror or exc}"
        return run
    run.meta = _read_meta(run.path)
    # meta.json is written once the run is over: a run that has one is not being written
    may_run = not (run.path / "meta.json").exists()
    if not raw.strip():
        if may_run and _being_written(run.path, held):
            run.running = True
        else:
            run.fatal = "events.jsonl is empty"
        return run
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace")
        run.problems.append("bytes that are not UTF-8 were replaced by \ufffd")
    pieces = text.split("\n")
    tail = pieces.pop()  # "" when the file ends with a newline
    bad = 0
    run_id: str | None = None
    versions: set[Any] = set()
    first_big: str | None = None  # the first event field the page cannot show exactly

    def problem(msg: str) -> None:
        nonlocal bad
        bad += 1
        if bad <= _MAX_PROBLEMS:
            run.problems.append(msg)

    # empty lines at the end (an editor's) are no events, as for the tables (`read_lines`); any
    # other blank line is a corrupt log there, so it is a refused line here (it had been skipped
    # without a word, and a run every analysis leaves out looked clean)
    end = len(pieces)
    while end and not pieces[end - 1]:
        end -= 1
    for i, line in enumerate(pieces[:end], start=1):
        if not line.strip():
            problem(f"line {i}: an empty line (a corrupt log); line left out")
            continue
        try:  # the tables' parser: the page shows exactly the events the tables would count
            ev, line = parse_line(line)
        except OtherVersion as exc:
            versions.add(exc.version)
            continue
        except ValueError as exc:
            problem(f"line {i}: {exc}; line left out")
            continue
        if run_id is None:
            run_id = ev["run_id"]
        elif ev["run_id"] != run_id:
            problem(f"line {i}: event of another run ({ev['run_id']!r}); line left out")
            continue
        run.lines.append(line)
        run.events.append(ev)
        if first_big is None:  # the page's numbers are doubles: past 2^53 an int is rounded
            big = next((k for k, x in ev.items() if type(x) is int and abs(x) > _EXACT), None)
            if big is not None:
                first_big = f"line {i}, {big} = {ev[big]}"
    if first_big is not None:
        run.problems.append(
            f"a number past 2^53 is shown rounded in the page, which reads numbers as "
            f"JavaScript does (first: {first_big}); the tables hold it exactly"
        )
    finished = any(e["kind"] == "run_ended" for e in run.events[-3:])
    run.running = not finished and may_run and _being_written(run.path, held)
    if bad > _MAX_PROBLEMS:
        run.problems.append(f"... and {bad - _MAX_PROBLEMS} more bad line(s)")
    if tail.strip() and not run.running:
        run.problems.append(
            f"line {len(pieces) + 1}: incomplete last line (the log is truncated: the run was "
            "interrupted or the file cut); shown up to the last complete event"
        )
    if versions:
        found = ", ".join(sorted(versions))
        if not run.events:
            run.fatal = (
                f"event version {found}: this mbb reads version {SCHEMA_VERSION} "
                "(re-run the condition, or view it with the mbb that wrote it)"
            )
            return run
        run.problems.append(
            f"{len(versions)} other event version(s) ({found}) left out: this mbb "
            f"reads version {SCHEMA_VERSION}"
        )
    if not run.events:
        if not run.running:
            run.fatal = "no valid event in events.jsonl"
        return run
    why = folder_problem(run.path, run_id or "")  # the tables' and `load_runs`' one rule
    if why is not None:  # a renamed or copied folder: not shown as the run its name says
        run.fatal = why
        return run
    if run.events[0]["kind"] != "run_started":
        run.problems.append("the log does not begin with run_started (its start is missing)")
    gaps = sum(1 for a, b in itertools.pairwise(run.events) if b["seq"] != a["seq"] + 1)
    if gaps:
        run.problems.append(f"{gaps} gap(s) in the event sequence (events missing)")
    if not finished and not run.running:
        run.problems.append("no run_ended event: the run did not finish")
    return run


# --- secrets ---------------------------------------------------------------------------------
_SECRET_PATTERNS = (
    re.compile(r"\bsk-[A-Za-z0-9_\-]{12,}"),  # OpenAI-style keys
    re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._\-]{12,}"),
    re.compile(
        r"(?i)\b((?:api[_-]?key|authorization|x-api-key|access[_-]?token|secret)"
        r"[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{6,}"
    ),
)
_MAYBE_SECRET = re.compile(r"(?i)sk-|bearer|api|authoriz|token|secret")  # cheap pre-check
_SECRET_ENV = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD)")
_SECRET_KEY = re.compile(r"(?i)^(api_?key|authorization|headers?|token|secret)$")


def _env_secrets() -> list[str]:
    return sorted(
        (v for k, v in os.environ.items() if _SECRET_ENV.search(k) and len(v) >= 8),
        key=len,
        reverse=True,
    )


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with API keys and tokens replaced by `[redacted]`: the values of secret-looking
    environment variables given in `secrets`, and anything shaped like a key or an auth header."""
    for s in secrets:
        if s in text:
            text = text.replace(s, "[redacted]")
    if not _MAYBE_SECRET.search(text):
        return text
    for rx in _SECRET_PATTERNS:
        if rx.groups:
            text = rx.sub(lambda m: m.group(1) + "[redacted]", text)
        else:
            text = rx.sub("[redacted]", text)
    return text


def _scrub(value: Any, secrets: Sequence[str]) -> Any:
    """A JSON value safe to write into a page: keys named like secrets removed, every string
    (keys too) redacted, and a `__proto__` key renamed (in a JavaScript object literal it would
    set the object's prototype instead of being data).

    Each distinct string and key is handled once per call, and a number or None is kept
    without a call: a run's file holds some 800 events of a dozen fields whose keys, kinds and
    names repeat, and redacting each again was most of `mbb view`'s build time."""
    texts: dict[str, str] = {}
    keys: dict[Any, str | None] = {}  # None: a key named like a secret, left out

    def text(s: str) -> str:
        out = texts.get(s)
        if out is None:
            out = texts[s] = redact(s, secrets)
        return out

    def key(k: Any) -> str | None:
        if k not in keys:
            name = str(k)
            if _SECRET_KEY.match(name):
                keys[k] = None
            else:
                name = text(name)
                keys[k] = "[__proto__]" if name == "__proto__" else name
        return keys[k]

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return text(v)
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                name = key(k)
                if name is not None:
                    out[name] = x if x is None or type(x) in _PLAIN else walk(x)
            return out
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        if isinstance(v, float) and not math.isfinite(v):
            return None  # NaN / Infinity are not JSON
        return v

    return walk(value)


_PLAIN = (int, bool)  # kept as they are (exact types: a subclass goes through `walk`)


# --- LLM prompts and answers (from the run's response cache) ----------------------------------
def _cache_candidates(
    run_dir: Path, root: Path, cache_file: str, named: Sequence[Path] = ()
) -> list[Path]:
    """Where a run's LLM cache may be: the file its params name (`llm.cache_file`), looked up
    from its folder up to `root`, and only where it lies inside `root` (resolved, so no link or
    `..` leads out: a colleague's log must not make the viewer copy prompts from a cache of
    yours into the page); then the caches you `named` (`mbb view --llm-cache`)."""
    out: list[Path] = []
    try:
        top = root.resolve()
        rel = Path(cache_file)
        for anc in [run_dir, *run_dir.parents]:
            for p in ([anc / rel] if not rel.is_absolute() else []) + [anc / rel.name]:
                if p.resolve().is_relative_to(top) and p not in out:
                    out.append(p)
            if anc.resolve() == top or anc == anc.parent:
                break
    except (OSError, ValueError, RuntimeError):  # a NUL in the name, a link loop
        pass
    return [*out, *named]


class _Caches:
    """Read-only access to the LLM response caches named by runs (opened once each)."""

    def __init__(self) -> None:
        self._db: dict[Path, sqlite3.Connection | None] = {}
        self.refused: dict[Path, str] = {}  # caches not read, and why

    def refusals(self, paths: list[Path]) -> list[str]:
        """Why caches among `paths` were not read (a view or a trigger in them)."""
        resolved = [p.resolve() for p in paths]
        return [f"{p.name}: {self.refused[p]}" for p in resolved if p in self.refused]

    def lookup(self, paths: list[Path], keys: list[str]) -> tuple[dict[str, dict[str, Any]], int]:
        """The first cache of `paths` holding any of `keys`: {key: its request and response},
        and how many of its rows for `keys` could not be read (not JSON, or nested past the
        parser's recursion: a colleague's cache is hostile input too)."""
        for path in paths:
            db = self._open(path)
            if db is None:
                continue
            found: dict[str, dict[str, Any]] = {}
            unreadable = 0
            try:
                for i in range(0, len(keys), 500):
                    chunk = keys[i : i + 500]
                    marks = ",".join("?" * len(chunk))
                    q = f"SELECT key, request, response FROM responses WHERE key IN ({marks})"
                    for key, req, resp in db.execute(q, chunk):
                        try:
                            found[key] = {
                                "request": safejson.loads(req),
                                "response": safejson.loads(resp),
                            }
                        except (ValueError, TypeError):
                            unreadable += 1
            except sqlite3.Error:
                continue
            if found or unreadable:
                return found, unreadable
        return {}, 0

    def _open(self, path: Path) -> sqlite3.Connection | None:
        path = path.resolve()
        if path not in self._db:
            db = None
            if path.is_file():
                try:
                    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
                    why = schema_problem(db)
                    if why is not None:  # a view or a trigger could run for ever
                        db.close()
                        db = None
                        self.refused[path] = f"not read: {why}"
                    else:
                        db.execute("SELECT 1 FROM responses LIMIT 1")
                except sqlite3.Error:
                    db = None
            self._db[path] = db
        return self._db[path]

    def close(self) -> None:
        for db in self._db.values():
            if db is not None:
                db.close()
        self._db.clear()


def _cap(text: str) -> str:
    if len(text) <= _TEXT_CAP:
        return text
    return text[:_TEXT_CAP] + f"\n[... {len(text) - _TEXT_CAP} more characters]"


def _prompt_text(request: Any) -> str:
    if not isinstance(request, Mapping):
        return ""
    parts = []
    messages = request.get("messages")
    for m in messages if isinstance(messages, list) else []:
        if not isinstance(m, Mapping):
            continue
        content = m.get("content")
        if isinstance(content, list):
            content = "\n".join(
                str(c.get("text", "")) if isinstance(c, Mapping) else str(c) for c in content
            )
        extra = ""
        if m.get("tool_calls"):
            extra = "\n[tool calls] " + json.dumps(m["tool_calls"], ensure_ascii=False)
        parts.append(f"[{m.get('role', '?')}]\n{content or ''}{extra}")
    return "\n\n".join(parts)


def _answer_text(response: Any) -> str:
    """The answer as stored by mbb's cache (an `LlmResult`: text, tool call, refusal, or an
    error), or an OpenAI-style response."""
    if not isinstance(response, Mapping):
        return json.dumps(response, ensure_ascii=False)
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        msg = choices[0].get("message")
        msg = msg if isinstance(msg, Mapping) else {}
        text = str(msg.get("content") or "")
        if msg.get("tool_calls"):
            text += "\n[tool calls] " + json.dumps(msg["tool_calls"], ensure_ascii=False)
        return text
    parts = []
    if isinstance(response.get("text"), str):
        parts.append(response["text"])
    if response.get("tool_name"):
        parts.append(f"[tool call] {response['tool_name']}({response.get('tool_arguments') or ''})")
    for key in ("refusal", "error"):
        if response.get(key):
            parts.append(f"[{key}] {response[key]}")
    if parts:
        return "\n".join(parts)
    return json.dumps(response, ensure_ascii=False, indent=1)


def _get(d: Any, *keys: str) -> Any:
    """`d[k1][k2]...` through dicts only (None when a level is missing or not a dict)."""
    for k in keys:
        if not isinstance(d, Mapping):
            return None
        d = d.get(k)
    return d


def _llm_texts(
    run: RunLog,
    root: Path,
    caches: _Caches,
    named: Sequence[Path] = (),
    secrets: Sequence[str] = (),
) -> tuple[dict[int, dict[str, Any]], list[str]]:
    """Each LLM call's prompt and answer from the run's response cache (`_cache_candidates`;
    `named`: the caches the user named), redacted (`secrets`: as `redact`) and cut, by the
    call's `seq`; and the problems to list with the run (no cache found, rows unreadable)."""
    calls = [e for e in run.events if e["kind"] == "llm_call" and e.get("request_key")]
    if not calls:
        return {}, []
    cache_file = _get(run.events[0], "params", "llm", "cache_file")
    if not isinstance(cache_file, str) or not cache_file:
        cache_file = "outputs/llm_cache.sqlite"
    candidates = _cache_candidates(run.path, root, cache_file, named)
    found, unreadable = caches.lookup(candidates, sorted({e["request_key"] for e in calls}))
    problems = []
    refused = caches.refusals(candidates)
    if not found and not unreadable and refused:
        problems.append(
            f"prompts and answers of its {len(calls)} LLM call(s) not shown: its cache "
            + "; ".join(refused)
        )
    elif not found and not unreadable:
        problems.append(
            f"prompts and answers of its {len(calls)} LLM call(s) not shown: no cache inside "
            "the folder holds them (a cache elsewhere is read only when you name it: "
            "mbb view --llm-cache FILE)"
        )
    if unreadable:
        problems.append(
            f"{unreadable} LLM cache row(s) of its calls could not be read (not JSON, or nested "
            "too deeply); those calls are shown without prompt and answer"
        )
    out: dict[int, dict[str, Any]] = {}
    previous: dict[Any, str] = {}  # the worker's previous prompt
    for e in sorted(calls, key=lambda e: e["seq"]):
        rec = found.get(e["request_key"])
        if rec is None:
            continue
        prompt = _prompt_text(rec["request"])
        before = previous.get(e.get("worker"), "")
        previous[e.get("worker")] = prompt
        out[e["seq"]] = {  # redacted before the cut (a secret across it would keep a part)
            "prompt": _cap(redact(prompt, secrets)),
            "answer": _cap(redact(_answer_text(rec["response"]), secrets)),
            # what is new in this prompt starts here (the rest repeats the worker's previous one)
            "new_at": min(_common_prefix(before, prompt), _TEXT_CAP),
        }
    return out, problems


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of `a` and `b` (by bisection on C-level compares)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


# --- labels and per-run measures (mbb.analysis over a chunk of runs) ---------------------------
def _per_chunk(
    runs: list[RunLog], computes: Sequence[Callable[[dict[str, Any]], dict[str, Any]]]
) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """Each of `computes(tables)` over the tables of all `runs` at once (one polars parse per
    kind, shared); when one fails, it is run again run by run, so that a run the analysis cannot
    take costs only its own result. Returns, per compute, (run_id -> result, run_id -> problem)."""
    from mbb.core.tables import tables_from_lines

    def tables_of(rs: list[RunLog]) -> dict[str, Any]:
        by_kind: dict[str, list[str]] = defaultdict(list)
        for r in rs:
            for line, ev in zip(r.lines, r.events, strict=True):
                by_kind[ev["kind"]].append(line)
        return tables_from_lines(by_kind)

    readable = [r for r in runs if r.fatal is None and r.events]
    try:
        tables: dict[str, Any] | None = tables_of(readable)
    except Exception:  # a log the tables cannot take: run by run below
        tables = None
    results: list[tuple[dict[str, Any], dict[str, str]]] = []
    for compute in computes:
        if tables is not None:
            try:
                results.append((compute(tables), {}))
                continue
            except Exception:  # find which run
                pass
        out: dict[str, Any] = {}
        problems: dict[str, str] = {}
        for r in readable:
            try:
                out.update(compute(tables_of([r])))
            except Exception as exc:
                problems[r.run_id] = f"{type(exc).__name__}: {str(exc)[:300]}"
        results.append((out, problems))
    return results


def _labels(tables: dict[str, Any]) -> dict[str, Any]:
    """run_id -> seq -> [[category, basis, evidence], ...] from `evidence_and_withheld`: the
    labels, then any withheld label (basis `withheld`, shown with the evidence, never as a
    label)."""
    import polars as pl

    from mbb.analysis import evidence_and_withheld

    out: dict[str, Any] = defaultdict(lambda: defaultdict(list))
    for run_id, seq, cat, basis, evidence in (
        pl.concat(evidence_and_withheld(tables))
        .select("run_id", "seq", "category", "basis", "evidence")
        .iter_rows()
    ):
        out[run_id][int(seq)].append([cat, basis, evidence])
    return out


MEASURES = (
    "score",
    "completion",
    "deadline_miss",
    "progress",
    "credits",
    "invalid_actions",
    "llm_calls",
    "failed_calls",
    "repaired_calls",
    "bad_call_share",
    "cost_usd",
    "tokens",
)
"""The per-run measures of the runs table (index entries carry them under these names)."""

LLM_MEASURES = (
    "llm_calls",
    "failed_calls",
    "repaired_calls",
    "bad_call_share",
    "cost_usd",
    "tokens",
)
"""The measures only a run that calls an LLM has."""
NO_API_CALLS = "scripted run: no API calls"
"""Why a run's `LLM_MEASURES` do not apply (index entries carry it as `llm_na`)."""


def _measures(tables: dict[str, Any]) -> dict[str, Any]:
    """run_id -> the `MEASURES` and `model`: outcomes from `mbb.analysis.outcome.outcomes` per
    run (score, completion, deadline misses, progress, credits paid, LLM cost); the run's model
    from `mbb.batch.study.run_models`; from its LLM calls, the failed ones (an error), the
    repaired ones (a repair round-trip) and their share, and tokens (prompt + completion, as
    `mbb.analysis.compare.model_table` counts them)."""
    import polars as pl

    from mbb.analysis.outcome import outcomes
    from mbb.analysis.tokens import run_models

    out: dict[str, dict[str, Any]] = defaultdict(dict)
    if tables["evaluations"].height:
        per = outcomes(tables, "run_id")
        for row in per.iter_rows(named=True):
            out[row["run_id"]].update(
                score=row["score"],
                completion=row["completion"],
                deadline_miss=row["deadline_miss"],
                progress=row["progress"],
                credits=row["credits_per_run"],
                cost_usd=row["cost_per_run_usd"],
            )
        for row in run_models(tables).iter_rows(named=True):
            out[row["run_id"]]["model"] = row["model"]
    inv = tables["invalid_actions"].group_by("run_id").len()
    for run_id, n in inv.iter_rows():
        out[run_id]["invalid_actions"] = n
    calls = tables["llm_calls"]
    if calls.height:
        agg = calls.group_by("run_id").agg(
            pl.len().alias("llm_calls"),
            pl.col("error").is_not_null().sum().alias("failed_calls"),
            pl.col("repair").fill_null(False).sum().alias("repaired_calls"),
            (pl.col("error").is_not_null() | pl.col("repair").fill_null(False))
            .sum()
            .alias("bad_calls"),
            (pl.col("prompt_tokens").fill_null(0) + pl.col("completion_tokens").fill_null(0))
            .sum()
            .alias("tokens"),
            total_cost(),  # unknown (null) when a call's model has no price, never $0
            known_cost(),
            without_usage(),
        )
        for row in agg.iter_rows(named=True):
            d = out[row.pop("run_id")]
            bad = row.pop("bad_calls")
            unreported = row.pop("calls_without_usage")
            known = row.pop("known_cost_usd")
            d.update(row, bad_call_share=bad / row["llm_calls"])
            if unreported:  # the endpoint reported no counts for some answers: unknown, not 0
                d["cost_usd"] = cost_text(None, unreported, known)
                d["tokens"] = tokens_text(row["tokens"], unreported)
            elif d["cost_usd"] is None:  # a model without a price: unknown, said so, never $0
                d["cost_usd"] = cost_text(None)
    return out


def _configured_model(run: RunLog) -> str:
    """The model names of the run's LLM workers from its params ('+'-joined), else 'scripted'."""
    first = run.events[0] if run.events else {}
    if first.get("kind") != "run_started":
        return ""
    names = set()
    for w in first["workers"]:
        if not isinstance(w, Mapping) or "llm" not in (w.get("negotiator"), w.get("solver")):
            continue
        cfg = w.get("model")
        name = _get(first["params"], "models", cfg, "model") if isinstance(cfg, str) else None
        names.add(str(name or cfg or "llm"))
    return "+".join(sorted(names)) or "scripted"


def _validity(entry: dict[str, Any], run: RunLog, given: float | None) -> None:
    """`valid` and `invalid_reason` of a run, judged from its log by `run_validity` (at the
    `given` threshold, else the one its meta.json records, else mbb's). meta.json can only make
    a run less valid: a folder received from someone else cannot mark a log with too many
    failed calls valid."""
    meta = run.meta
    threshold = recorded_threshold(meta) if given is None else given
    v = run_validity(run.lines, threshold)
    if not v["valid"]:
        errors = v["backend_errors"]
        bad = v["failed_calls"] + v["repaired_calls"] + errors
        lost = f", {errors} lost to a backend error" if errors else ""
        entry["valid"] = False
        entry["invalid_reason"] = (
            f"{bad} of {v['llm_calls'] + errors} LLM calls failed or needed a repair "
            f"({v['failed_or_repaired_share']:.1%} > {threshold:.0%}: {v['failed_calls']} "
            f"failed, {v['repaired_calls']} repaired{lost})"
        )
    elif meta.get("valid") is False:
        entry["valid"] = False
        entry["invalid_reason"] = str(meta.get("invalid_reason") or "marked invalid in meta.json")
    else:
        entry["valid"] = True
        entry["invalid_reason"] = None


# --- the user's columns ------------------------------------------------------------------------
_MAX_COLUMNS = 40
_KEY_NAMES = ("run_id", "run", "id")


def _scalar(v: Any) -> Any:
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return v if math.isfinite(v) else None
    if isinstance(v, str):
        s = v.strip()
        if s == "":
            return None
        try:
            f = float(s)
        except ValueError:
            return s[:500]
        if not math.isfinite(f):
            return s[:500]
        return int(f) if f.is_integer() and re.fullmatch(r"[-+]?\d+", s) else f
    raise ValueError(f"a {type(v).__name__} is not a value for a column (numbers or text only)")


def read_columns(path: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Per-run values from a CSV (a header row; a `run_id` column, or `run` or `id`) or a JSON
    file (`{run_id: {column: value}}` or `[{"run_id": ..., column: value}, ...]`): run id ->
    column -> number or text. Raises ValueError with the file and what is wrong."""
    path = Path(path)
    try:
        if path.suffix.lower() == ".json":
            # a pipe is refused, not waited on; a file larger than any record, not read
            data = safejson.loads(safejson.read_text(path))
            if isinstance(data, dict):
                rows = [
                    {"run_id": k, **v} if isinstance(v, dict) else None for k, v in data.items()
                ]
            elif isinstance(data, list):
                rows = data
            else:
                raise ValueError("expected an object keyed by run id or a list of objects")
        else:
            text = safejson.read_text(path)
            rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except (OSError, UnicodeDecodeError, csv.Error, json.JSONDecodeError, safejson.TooLarge) as exc:
        raise ValueError(f"{path.name}: cannot be read ({exc})") from None
    values: dict[str, dict[str, Any]] = {}
    names: list[str] = []
    for i, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise ValueError(f"{path.name}: row {i} is not an object of column values")
        key = next((k for k in _KEY_NAMES if k in row), None)
        if key is None or not isinstance(row[key], (str, int)) or row[key] in ("", None):
            raise ValueError(
                f"{path.name}: row {i} has no run id (a column {'/'.join(_KEY_NAMES)})"
            )
        run = str(row[key])
        for name, v in row.items():
            if name == key or name is None:
                continue
            name = str(name).strip()[:60]
            if not name:
                continue
            try:
                values.setdefault(run, {})[name] = _scalar(v)
            except ValueError as exc:
                raise ValueError(f"{path.name}: row {i}, column {name!r}: {exc}") from None
            if name not in names:
                names.append(name)
    if len(names) > _MAX_COLUMNS:
        raise ValueError(f"{path.name}: {len(names)} columns; at most {_MAX_COLUMNS} are shown")
    return values, names


# --- the page ----------------------------------------------------------------------------------
def _js_json(value: Any) -> str:
    """JSON that is also safe JavaScript inside a file loaded by a script tag (and inline)."""
    return (
        json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        .replace("<", "\\u003c")  # no `</script>` or `<!--` can occur; still valid JSON
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _compact(ev: Mapping[str, Any]) -> dict[str, Any]:
    d = {k: v for k, v in ev.items() if k not in _DROP}
    if d.get("kind") == "run_started":
        d.pop("provenance", None)
    return d


_TEXT_FIELDS = {"declared": "note", "message": "text", "ballot": "reasoning"}


def _text_rows(events: Iterable[Mapping[str, Any]]) -> list[list[Any]]:
    """[seq, subrun, round, worker, to, source, text] of each piece of run text, for the search
    over every run (the same sources as the open run's search, and commands)."""
    rows = []
    for e in events:
        k = e["kind"]
        if k in _TEXT_FIELDS:
            text = e[_TEXT_FIELDS[k]]
            src = "ballot" if k == "ballot" else "declaration" if k == "declared" else None
            if src is None:
                src = "public" if e.get("to") is None else "private"
        elif k == "scratch_written":
            text, src = e["text"], "memory"
        elif k == "command":
            text, src = e["command"], "command"
        else:
            continue
        if text:
            rows.append(
                [e["seq"], e.get("subrun"), e.get("round"), e.get("worker"), e.get("to"), src, text]
            )
    return rows


def _summary(run: RunLog) -> dict[str, Any]:
    first = run.events[0] if run.events else {}
    status = "running" if run.running else "unfinished"
    completed = terminated = rounds = 0
    subruns: set[int] = set()
    for e in run.events:
        k = e["kind"]
        if k == "run_ended":
            status = e["status"]
        elif k == "evaluation":
            completed += e["outcome"] == "completed"
            terminated += e["outcome"] == "terminated"
        elif k == "round_started":
            rounds += 1
        if e.get("subrun") is not None:
            subruns.add(e["subrun"])
    started = first.get("kind") == "run_started"
    return {
        "id": run.run_id,
        "condition": first["condition"] if started else run.path.parent.name,
        "seed": first["seed"] if started else None,
        "status": status,
        "events": len(run.events),
        "subruns": len(subruns),
        "rounds": rounds,
        "completed": completed,
        "terminated": terminated,
        "llm_calls": sum(1 for e in run.events if e["kind"] == "llm_call"),
        "model": _configured_model(run),
    }


def _path_names(root: Path) -> list[tuple[str, str]]:
    """(absolute prefix, neutral name), longest first: the folder viewed, the project, the home
    folder (as JSON strings: what occurs in a data file)."""
    from mbb.core.paths import PROJECT_ROOT

    pairs = {
        str(root.resolve()): root.resolve().name,
        str(PROJECT_ROOT): "<mbb>",
        str(Path.home()): "~",
    }
    if len(root.resolve().parent.parts) > 2:
        pairs.setdefault(str(root.resolve().parent), "..")
    out = [
        (json.dumps(k)[1:-1], json.dumps(v)[1:-1])
        for k, v in pairs.items()
        if len(Path(k).parts) > 1
    ]
    return sorted(out, key=lambda kv: len(kv[0]), reverse=True)


@dataclass
class ViewerResult:
    index: Path
    runs: int
    bad: list[tuple[str, str]]  # (run folder relative to root, reason) of runs not shown
    warnings: list[tuple[str, str]]  # (run, problem) of runs shown in part
    seconds: float
    changed: int = 0  # runs (re)written by this pass (all of them for a build)


def _rel(path: Path, root: Path) -> str:
    try:  # the folder's own name, not where a link there points
        rel = (path.parent.resolve() / path.name).relative_to(root.resolve()).as_posix()
    except ValueError:
        rel = path.name
    return rel if rel != "." else root.resolve().name


class _Viewer:
    """The viewer of one folder, written once (`update` after construction) or kept up to date
    (`update` again: only runs that appeared, changed or vanished are read and written)."""

    def __init__(
        self,
        root: Path,
        out: Path,
        *,
        columns: Sequence[Path] = (),
        invalid_share: float | None = None,
        live: float | None = None,
        llm_caches: Sequence[Path] = (),
        out_given: bool = False,
    ) -> None:
        self.root, self.out = root, out
        self.out_given = out_given  # the user named `out`: it may itself be a link
        self.llm_caches = list(llm_caches)
        self.runs_dir = out / "data" / "runs"
        self.text_dir = out / "data" / "text"
        self.columns = list(columns)
        self.invalid_share = invalid_share
        self.live = live  # the page polls the index every `live` seconds (watch mode)
        self.secrets = _env_secrets()
        self.path_names = dict(_path_names(root))
        # a prefix only where a path ends or goes on (`/root` in `/root/x`, never in `/rooted`)
        prefixes = "|".join(re.escape(k) for k in self.path_names) or "(?!)"
        self.paths = re.compile(f"(?:{prefixes})" + r"""(?=[/\\"\s,;:)\]}']|$)""")
        self.entries: dict[Path, dict[str, Any]] = {}
        self.signatures: dict[Path, tuple[Any, ...]] = {}
        self.texts: dict[int, list[list[Any]]] = {}
        self.numbers: dict[Path, int] = {}
        self.next_n = 0
        self.version = 0
        self.column_problems: list[str] = []
        self.column_values: dict[str, dict[str, Any]] = {}
        self.column_names: list[dict[str, Any]] = []
        self.column_stamp: tuple[Any, ...] | None = None
        self.text_files: dict[int, dict[str, Any]] = {}
        self.index_problems: list[str] = []  # about the columns files, as the index states them

    # -- writing files (every value scrubbed, every file replaced atomically) --
    def _write(self, path: Path, call: str, value: Any) -> None:
        body = _js_json(_scrub(value, self.secrets))
        body = self.paths.sub(lambda m: self.path_names[m.group(0)], body)  # no path of ours
        replace_file(path, f"{call}{body});\n")

    def _signature(self, d: Path, held: set[str] | None) -> tuple[Any, ...]:
        """What says a run changed since the last pass: its log's and meta.json's own entries
        (not a link's target), their size, inode, modification and change times. The change
        time moves with every write, even one that puts the old size and modification time
        back (`touch -r`), and a file replaced by another, or by a link, has another inode."""

        def entry(path: Path) -> tuple[int, ...] | None:
            try:
                st = path.lstat()
            except OSError:
                return None
            return (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

        meta = entry(d / "meta.json")
        # a run without its meta.json may still be written: whether it is, is part of its state
        writing = meta is None and _being_written(d, held)
        return (entry(d / "events.jsonl"), meta, writing)

    def _column_files(self) -> tuple[list[Path], list[str]]:
        """(the columns files to read, why others in the folder are not read). Picked up from
        the folder: only a regular file of its own (a link could point at any file of yours,
        and its values and keys would reach the page; a pipe would block the build)."""
        auto, refused = [], []
        for name in COLUMN_FILES:
            path = self.root / name
            if path.is_symlink() or (path.exists() and not path.is_file()):
                refused.append(f"{name}: a symbolic link or not a regular file: not read")
            elif path.is_file():
                auto.append(path)
        return [*self.columns, *auto], refused

    def _read_columns(self) -> bool:
        files, refused = self._column_files()
        stamp = (
            tuple((str(p), p.stat().st_mtime_ns if p.exists() else None) for p in files),
            tuple(refused),
        )
        if stamp == self.column_stamp:
            return False
        self.column_stamp = stamp
        self.column_values, self.column_names, self.column_problems = {}, [], list(refused)
        builtin = {"id", "condition", "model", "seed", "status", "valid", *MEASURES}
        for p in files:
            try:
                values, names = read_columns(p)
            except ValueError as exc:
                self.column_problems.append(str(exc))
                continue
            rename = {n: (f"{n} ({p.name})" if n in builtin else n) for n in names}
            for run, row in values.items():
                dst = self.column_values.setdefault(run, {})
                for n, v in row.items():
                    dst[rename[n]] = v
            for n in names:
                col = rename[n]
                kinds = {
                    type(row[n]).__name__
                    for row in values.values()
                    if n in row and row[n] is not None
                }
                numeric = kinds <= {"int", "float"}
                self.column_names.append(
                    {"name": col, "kind": "number" if numeric else "text", "file": p.name}
                )
        return True

    def _entry(
        self,
        n: int,
        run: RunLog,
        labels: Mapping[str, Any],
        measures: Mapping[str, Any],
        problems: Sequence[str],
        caches: _Caches,
    ) -> dict[str, Any]:
        rel = _rel(run.path, self.root)
        entry: dict[str, Any] = {"n": n, "path": rel, "v": self.version}
        if run.fatal is not None:
            entry.update(id=rel, condition=run.path.parent.name, status="unreadable")
            entry["error"] = run.fatal
            return entry
        entry.update(_summary(run))
        m = measures.get(run.run_id, {})
        entry.update({k: m.get(k) for k in MEASURES if k != "llm_calls"})
        if m.get("model") and entry["llm_calls"]:
            entry["model"] = m["model"]  # the models its calls used (mbb.batch.study.run_models)
        if entry["model"] == "scripted" and not entry["llm_calls"]:
            # its LLM measures do not apply (not 0, not blank): the viewer shows a mark and this
            entry["llm_na"] = NO_API_CALLS
        if entry["invalid_actions"] is None and run.events:
            entry["invalid_actions"] = 0
        _validity(entry, run, self.invalid_share)
        llm, llm_problems = (
            _llm_texts(run, self.root, caches, self.llm_caches, self.secrets)
            if run.events
            else ({}, [])
        )
        entry["problems"] = [*run.problems, *problems, *llm_problems]
        if not run.events:
            return entry
        entry["file"] = f"data/runs/{n:06d}.js"
        payload = {
            "n": n,
            "summary": entry,
            "events": [_compact(e) for e in run.events],
            "labels": labels.get(run.run_id, {}),
            "llm": llm,
        }
        self._write(self.runs_dir / f"{n:06d}.js", f"MBB.run({n},", payload)
        return entry

    def _process(self, dirs: list[Path], held: set[str] | None, caches: _Caches) -> None:
        """Read, analyse and write `dirs` (a chunk), updating their index entries and text."""
        runs = [read_run(d, held) for d in dirs]
        # runs of one id (copies of a run in two folders) are analysed apart
        batches: list[list[RunLog]] = []
        for r in runs:
            for b in batches:
                if all(x.run_id != r.run_id for x in b):
                    b.append(r)
                    break
            else:
                batches.append([r])
        for batch in batches:
            (labels, label_problems), (measures, measure_problems) = _per_chunk(
                batch, [_labels, _measures]
            )
            for run in batch:
                n = self.numbers.setdefault(run.path, self.next_n)
                self.next_n = max(self.next_n, n + 1)
                problems = []
                if run.run_id in label_problems:
                    problems.append(f"taxonomy labels unavailable: {label_problems[run.run_id]}")
                if run.run_id in measure_problems:
                    problems.append(f"measures unavailable: {measure_problems[run.run_id]}")
                entry = self._entry(n, run, labels, measures, problems, caches)
                self.entries[run.path] = entry
                self.texts[n] = _text_rows(run.events) if run.fatal is None else []

    def _write_text(self, k: int) -> None:
        """The text of runs k*_CHUNK.. as {"strings": [...], "runs": {n: [[seq, subrun, round,
        worker, to, source, i], ...]}}: each distinct text once (scripted runs repeat theirs:
        a quarter of the size, and a search reads each text once)."""
        lo, hi = k * _CHUNK, (k + 1) * _CHUNK
        strings: dict[str, int] = {}
        runs = {
            str(n): [[*r[:6], strings.setdefault(r[6], len(strings))] for r in self.texts[n]]
            for n in range(lo, hi)
            if self.texts.get(n)
        }
        payload = {"strings": list(strings), "runs": runs}
        self._write(self.text_dir / f"{k:06d}.js", f"MBB.text({k},", payload)

    def update(self) -> ViewerResult:
        """Bring the viewer up to date with the folder (the first call writes everything)."""
        t0 = time.perf_counter()
        _refuse_links(self.out, given=self.out_given)
        first = self.version == 0
        self.version += 1
        if first:
            for d in (self.runs_dir, self.text_dir):
                d.mkdir(parents=True, exist_ok=True)
                for old in d.glob("*.js"):  # a rebuild never leaves a previous run's file behind
                    old.unlink()
        held = _held_flocks()
        run_dirs = find_run_dirs([self.root], exclude=[self.out])
        signatures = {d: self._signature(d, held) for d in run_dirs}
        changed = [d for d in run_dirs if self.signatures.get(d) != signatures[d]]
        gone = [d for d in self.entries if d not in signatures]
        touched: set[int] = set()
        for d in gone:
            n = self.entries.pop(d)["n"]
            self.signatures.pop(d, None)
            self.texts.pop(n, None)
            (self.runs_dir / f"{n:06d}.js").unlink(missing_ok=True)
            touched.add(n // _CHUNK)
        caches = _Caches()
        try:
            # in chunks: memory stays bounded by a chunk's events, whatever the number of runs
            for i in range(0, len(changed), _CHUNK):
                chunk = changed[i : i + _CHUNK]
                self._process(chunk, held, caches)
                for d in chunk:
                    self.signatures[d] = signatures[d]
                    touched.add(self.entries[d]["n"] // _CHUNK)
        finally:
            caches.close()
        columns_changed = self._read_columns()
        if first or changed or gone or columns_changed:
            self._write_index(touched, first, bool(run_dirs))
        entries = sorted(self.entries.values(), key=lambda e: e["n"])
        bad = [(e["path"], e["error"]) for e in entries if e["status"] == "unreadable"]
        warnings = [(e["path"], p) for e in entries for p in e.get("problems", ())]
        warnings += [("columns", p) for p in self.index_problems]
        return ViewerResult(
            self.out / "index.html",
            len(entries),
            bad,
            warnings,
            time.perf_counter() - t0,
            len(changed) + len(gone),
        )

    def _write_index(self, touched: set[int], first: bool, any_runs: bool) -> None:
        for k in sorted(touched):
            self._write_text(k)
        shards = sorted({n // _CHUNK for n in self.texts})
        for k in list(self.text_files):
            if k not in shards:
                del self.text_files[k]
                (self.text_dir / f"{k:06d}.js").unlink(missing_ok=True)
        for k in shards:
            if k in touched or k not in self.text_files:
                self.text_files[k] = {"k": k, "file": f"data/text/{k:06d}.js", "v": self.version}
        entries = sorted(self.entries.values(), key=lambda e: e["n"])
        for e in entries:
            e["cols"] = self.column_values.get(e["id"]) or self.column_values.get(e["path"]) or {}
        known = {e["id"] for e in entries} | {e["path"] for e in entries}
        unknown = sorted(k for k in self.column_values if k not in known)
        problems = self.index_problems = list(self.column_problems)
        if unknown and entries:
            problems.append(
                f"{len(unknown)} run id(s) in the columns file(s) are not in this folder: "
                + ", ".join(unknown[:5])
                + (" ..." if len(unknown) > 5 else "")
            )
        index = {
            "root": self.root.resolve().name,
            "built": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime()),
            "version": self.version,
            "live": self.live,
            "invalid_share": INVALID_SHARE if self.invalid_share is None else self.invalid_share,
            "runs": entries,
            "columns": self.column_names,
            "column_problems": problems,
            "text": [self.text_files[k] for k in shards],
            "message": None
            if any_runs
            else f"no runs in {self.root.resolve().name}/: "
            "no folder under it holds an events.jsonl",
        }
        self._write(self.out / "data" / "index.js", "MBB.index(", index)
        if first:
            self._write_page()

    def _write_page(self) -> None:
        page = (STATIC / "viewer.html").read_text(encoding="utf-8")
        page = page.replace("/*MBB_CSS*/", (STATIC / "viewer.css").read_text(encoding="utf-8"))
        js = "\n".join((STATIC / name).read_text(encoding="utf-8") for name in _SCRIPTS)
        page = page.replace("/*MBB_JS*/", js)
        replace_file(self.out / "index.html", page)


def _prepare(root: str | Path, out: str | Path | None) -> tuple[Path, Path]:
    """(root, out) checked: the folders the viewer writes into are never symbolic links (a
    `viewer/data/runs` planted in a colleague's folder would have its target's files deleted
    and replaced); an `out` you give may be one."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a folder")
    folder = Path(out) if out is not None else root / "viewer"
    _refuse_links(folder, given=out is not None)
    (folder / "data").mkdir(parents=True, exist_ok=True)
    return root, folder


def _refuse_links(folder: Path, *, given: bool) -> None:
    """OutputError when a folder the viewer writes into under `folder` is a symbolic link
    (`folder` itself too unless the user `given` it). Checked before the first pass and before
    every pass of `watch_viewer`: a link planted between passes had its target's files deleted
    and replaced."""
    mine = [folder / "data", folder / "data" / "runs", folder / "data" / "text"]
    for d in mine if given else [folder, *mine]:
        if d.is_symlink():
            raise OutputError(
                f"{d}: a symbolic link; the viewer never writes through one (remove it, or "
                "give --out)"
            )


def build_viewer(
    root: str | Path,
    out: str | Path | None = None,
    *,
    columns: Sequence[str | Path] = (),
    invalid_share: float | None = None,
    llm_caches: Sequence[str | Path] = (),
) -> ViewerResult:
    """Write the viewer of every run under `root` to `out` (default `root/viewer`).

    columns: files of per-run values to show as extra columns of the runs table (see
    `read_columns`); `viewer-columns.csv` / `viewer-columns.json` in `root` are read too.
    invalid_share: a run whose LLM calls failed or were repaired more often than this is marked
    invalid (None: the threshold each run's meta.json records, else mbb's 5 %); its meta.json
    can mark it invalid too, never valid.
    llm_caches: LLM caches outside `root` to read prompts and answers from (a run's own cache
    is read only when it lies inside `root`)."""
    r, o = _prepare(root, out)
    return _Viewer(
        r,
        o,
        columns=[Path(c) for c in columns],
        invalid_share=invalid_share,
        llm_caches=[Path(c) for c in llm_caches],
        out_given=out is not None,
    ).update()


def watch_viewer(
    root: str | Path,
    out: str | Path | None = None,
    *,
    interval: float = 2.0,
    columns: Sequence[str | Path] = (),
    invalid_share: float | None = None,
    report: Callable[[ViewerResult], Any] | None = None,
    stop: Callable[[], bool] | None = None,
    llm_caches: Sequence[str | Path] = (),
) -> ViewerResult:
    """`build_viewer`, then keep it up to date every `interval` seconds until `stop()` is true
    (default: never; Ctrl-C ends it). `report(result)` is called after the build and after each
    pass that changed something. The page polls its index at the same interval. `root`, `out`,
    `columns`, `invalid_share`, `llm_caches`: as in `build_viewer`."""
    if not interval > 0:
        raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
    r, o = _prepare(root, out)
    viewer = _Viewer(
        r,
        o,
        columns=[Path(c) for c in columns],
        invalid_share=invalid_share,
        live=interval,
        llm_caches=[Path(c) for c in llm_caches],
        out_given=out is not None,
    )
    res = viewer.update()
    if report is not None:
        report(res)
    while not (stop is not None and stop()):
        time.sleep(interval)
        res = viewer.update()
        if res.changed and report is not None:
            report(res)
    return res
