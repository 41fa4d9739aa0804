"""`mbb view`: a static, offline viewer over every run of a folder.

`build_viewer(root, out)` writes

- `out/index.html`: the page, with its CSS and its (dependency-free) JavaScript inlined;
- `out/data/index.js`: one line per run (condition, seed, status, counts, problems);
- `out/data/runs/<n>.js`: one file per run, loaded only when the run is opened.

Data files are JavaScript (`MBB.index({...})`, `MBB.run(n, {...})`) loaded by `<script src>`:
`fetch()` of a `file://` URL is blocked by browsers, a script tag is not. The page therefore works
from a plain folder (or a zip, or any static web server) with the network off.

Only mbb's own artefacts are read: a run is a folder holding `events.jsonl`; nothing beneath a run
folder (its `resource/` with the workers' workspaces) is looked at, and no notebook is read. Every
piece of text reaches the page as data and is put in with `textContent`, never as HTML.

Bad input never stops the build: a folder with no runs still gets a page saying so; a run whose
log is corrupt, truncated, of another event version or of another run is listed with the reason,
and the runs around it are shown.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sqlite3
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mbb.core.events import EVENT_KINDS, SCHEMA_VERSION

__all__ = ["RunLog", "ViewerResult", "build_viewer", "find_runs", "read_run", "redact"]

STATIC = Path(__file__).resolve().parent / "viewer_static"
_DROP = ("v", "run_id", "wall", "intents")  # per-event fields the page does not need
_SKIP_DIRS = frozenset({"tables", ".ipynb_checkpoints", "__pycache__", ".git"})
_MAX_PROBLEMS = 5  # bad lines reported per run (the rest are counted)
_TEXT_CAP = 20_000  # characters of one prompt / answer shown
_CHUNK = 200  # runs read, labelled and written at a time


# --- finding and reading runs ----------------------------------------------------------------
def find_runs(root: Path, exclude: Iterable[Path] = ()) -> list[Path]:
    """Every run folder (one holding `events.jsonl`) under `root`, sorted; `root` itself may be
    one. Nothing beneath a run folder is visited (workspaces live there), nor `exclude`."""
    root = Path(root)
    skip = {Path(p).resolve() for p in exclude}
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        if "events.jsonl" in filenames:
            found.append(here)
            dirnames[:] = []
            continue
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in _SKIP_DIRS and not d.startswith(".") and (here / d).resolve() not in skip
        )
    return sorted(found)


@dataclass
class RunLog:
    """One run's log as read by the viewer: its valid events and what was wrong with the rest."""

    path: Path
    lines: list[str] = field(default_factory=list)  # valid event lines, in order
    events: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    fatal: str | None = None  # the run cannot be shown at all (and why)

    @property
    def run_id(self) -> str:
        if self.events:
            return str(self.events[0].get("run_id", self.path.name))
        return self.path.name


def read_run(run_dir: Path) -> RunLog:
    """Read `run_dir/events.jsonl` tolerantly: every line that is not a valid mbb event of this
    run and version is reported (file and line number) and left out; the rest is kept."""
    run = RunLog(Path(run_dir))
    path = run.path / "events.jsonl"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        run.fatal = f"events.jsonl cannot be read: {exc.strerror or exc}"
        return run
    if not raw.strip():
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

    def problem(msg: str) -> None:
        nonlocal bad
        bad += 1
        if bad <= _MAX_PROBLEMS:
            run.problems.append(msg)

    for i, line in enumerate(pieces, start=1):
        if not line.strip():
            continue
        try:
            ev = json.loads(line)
        except ValueError as exc:  # JSONDecodeError, or a number too long to convert to int
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc).split(":")[0]
            problem(f"line {i}: not valid JSON ({why}); line left out")
            continue
        if not isinstance(ev, dict) or ev.get("kind") not in EVENT_KINDS:
            kind = ev.get("kind") if isinstance(ev, dict) else type(ev).__name__
            problem(f"line {i}: not an mbb event (kind {kind!r}); line left out")
            continue
        if ev.get("v") != SCHEMA_VERSION:
            versions.add(ev.get("v"))
            continue
        if run_id is None:
            run_id = ev.get("run_id")
        elif ev.get("run_id") != run_id:
            problem(f"line {i}: event of another run ({ev.get('run_id')!r}); line left out")
            continue
        run.lines.append(line)
        run.events.append(ev)
    if bad > _MAX_PROBLEMS:
        run.problems.append(f"... and {bad - _MAX_PROBLEMS} more bad line(s)")
    if tail.strip():
        run.problems.append(
            f"line {len(pieces) + 1}: incomplete last line (the log is truncated: the run was "
            "interrupted or the file cut); shown up to the last complete event"
        )
    if versions:
        found = ", ".join(sorted(str(v) for v in versions))
        if not run.events:
            run.fatal = (
                f"event version {found}: this mbb reads version {SCHEMA_VERSION} "
                "(re-run the condition, or view it with the mbb that wrote it)"
            )
            return run
        run.problems.append(
            f"{sum(1 for _ in versions)} other event version(s) ({found}) left out: this mbb "
            f"reads version {SCHEMA_VERSION}"
        )
    if not run.events:
        run.fatal = "no valid event in events.jsonl"
        return run
    if run.events[0].get("kind") != "run_started":
        run.problems.append("the log does not begin with run_started (its start is missing)")
    seqs = [e.get("seq") for e in run.events]
    gaps = sum(
        1
        for a, b in itertools.pairwise(seqs)
        if isinstance(a, int) and isinstance(b, int) and b != a + 1
    )
    if gaps:
        run.problems.append(f"{gaps} gap(s) in the event sequence (events missing)")
    if not any(e.get("kind") == "run_ended" for e in run.events[-3:]):
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
_SECRET_ENV = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD)")


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
    for rx in _SECRET_PATTERNS:
        if rx.groups:
            text = rx.sub(lambda m: m.group(1) + "[redacted]", text)
        else:
            text = rx.sub("[redacted]", text)
    return text


def _scrub(value: Any, secrets: list[str]) -> Any:
    """A JSON value with secret-named keys removed and every string redacted."""
    if isinstance(value, dict):
        return {
            k: _scrub(v, secrets)
            for k, v in value.items()
            if not re.search(r"(?i)^(api_?key|authorization|headers?|token|secret)$", str(k))
        }
    if isinstance(value, list):
        return [_scrub(v, secrets) for v in value]
    if isinstance(value, str):
        return redact(value, secrets)
    return value


# --- LLM prompts and answers (from the run's response cache) ----------------------------------
def _cache_candidates(run_dir: Path, root: Path, cache_file: str) -> list[Path]:
    p = Path(cache_file).expanduser()
    if p.is_absolute():
        return [p]
    out = [Path.cwd() / p]
    for anc in [run_dir, *run_dir.parents]:
        out += [anc / p, anc / p.name]
        if anc == root.parent or anc == anc.parent:
            break
    return out


class _Caches:
    """Read-only access to the LLM response caches named by runs (opened once each)."""

    def __init__(self) -> None:
        self._db: dict[Path, sqlite3.Connection | None] = {}

    def lookup(self, paths: list[Path], keys: list[str]) -> dict[str, dict[str, Any]]:
        for path in paths:
            db = self._open(path)
            if db is None:
                continue
            found: dict[str, dict[str, Any]] = {}
            try:
                for i in range(0, len(keys), 500):
                    chunk = keys[i : i + 500]
                    marks = ",".join("?" * len(chunk))
                    q = f"SELECT key, request, response FROM responses WHERE key IN ({marks})"
                    for key, req, resp in db.execute(q, chunk):
                        found[key] = {"request": json.loads(req), "response": json.loads(resp)}
            except (sqlite3.Error, ValueError):
                continue
            if found:
                return found
        return {}

    def _open(self, path: Path) -> sqlite3.Connection | None:
        path = path.resolve()
        if path not in self._db:
            db = None
            if path.is_file():
                try:
                    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
                    db.execute("SELECT 1 FROM responses LIMIT 1")
                except sqlite3.Error:
                    db = None
            self._db[path] = db
        return self._db[path]

    def close(self) -> None:
        for db in self._db.values():
            if db is not None:
                db.close()


def _cap(text: str) -> str:
    if len(text) <= _TEXT_CAP:
        return text
    return text[:_TEXT_CAP] + f"\n[... {len(text) - _TEXT_CAP} more characters]"


def _prompt_text(request: Mapping[str, Any]) -> str:
    parts = []
    for m in request.get("messages") or []:
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


def _answer_text(response: Mapping[str, Any]) -> str:
    """The answer as stored by mbb's cache (an `LlmResult`: text, tool call, refusal, or an
    error), or an OpenAI-style response."""
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        msg = choices[0].get("message") or {}
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


def _llm_texts(
    run: RunLog, root: Path, caches: _Caches, secrets: list[str]
) -> dict[int, dict[str, str]]:
    calls = [e for e in run.events if e.get("kind") == "llm_call" and e.get("request_key")]
    if not calls:
        return {}
    params = run.events[0].get("params") or {} if run.events else {}
    cache_file = (params.get("llm") or {}).get("cache_file") or "outputs/llm_cache.sqlite"
    found = caches.lookup(
        _cache_candidates(run.path, root, str(cache_file)),
        sorted({str(e["request_key"]) for e in calls}),
    )
    out: dict[int, dict[str, str]] = {}
    for e in calls:
        rec = found.get(str(e["request_key"]))
        if rec is None:
            continue
        out[int(e["seq"])] = {
            "prompt": _cap(redact(_prompt_text(rec["request"]), secrets)),
            "answer": _cap(redact(_answer_text(rec["response"]), secrets)),
        }
    return out


# --- taxonomy labels ---------------------------------------------------------------------------
def _labels(runs: list[RunLog]) -> tuple[dict[str, dict[int, list[list[str]]]], str | None]:
    """run_id -> seq -> [[category, basis, evidence], ...] from `classify_evidence` over every
    readable run at once (one polars parse per kind); a failure is reported, not raised."""
    from mbb.analysis import classify_evidence
    from mbb.core.tables import tables_from_lines

    by_kind: dict[str, list[str]] = defaultdict(list)
    for r in runs:
        if r.fatal is None:
            for line, ev in zip(r.lines, r.events, strict=True):
                by_kind[ev["kind"]].append(line)
    out: dict[str, dict[int, list[list[str]]]] = defaultdict(lambda: defaultdict(list))
    try:
        labels = classify_evidence(tables_from_lines(by_kind))
    except Exception as exc:  # a log that parses as JSON but not as tables: say so, show the rest
        return {}, f"taxonomy labels unavailable: {type(exc).__name__}: {str(exc)[:300]}"
    for run_id, seq, cat, basis, evidence in labels.select(
        "run_id", "seq", "category", "basis", "evidence"
    ).iter_rows():
        out[run_id][int(seq)].append([cat, basis, evidence])
    return out, None


# --- the page ----------------------------------------------------------------------------------
def _js_json(value: Any) -> str:
    """JSON that is also safe JavaScript inside a file loaded by a script tag (and inline)."""
    return (
        json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        .replace("<", "\\u003c")  # no `</script>` or `<!--` can occur; still valid JSON
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _compact(ev: Mapping[str, Any], secrets: list[str]) -> dict[str, Any]:
    d = {k: v for k, v in ev.items() if k not in _DROP}
    if d.get("kind") == "run_started":
        d["params"] = _scrub(d.get("params") or {}, secrets)
        d.pop("provenance", None)
    elif d.get("kind") == "command" and isinstance(d.get("command"), str):
        d["command"] = redact(d["command"], secrets)
    return d


def _summary(run: RunLog) -> dict[str, Any]:
    first = run.events[0] if run.events else {}
    status = "unfinished"
    completed = terminated = rounds = 0
    subruns: set[Any] = set()
    for e in run.events:
        k = e.get("kind")
        if k == "run_ended":
            status = str(e.get("status"))
        elif k == "evaluation":
            completed += e.get("outcome") == "completed"
            terminated += e.get("outcome") == "terminated"
        elif k == "round_started":
            rounds += 1
        if e.get("subrun") is not None:
            subruns.add(e.get("subrun"))
    llm = sum(1 for e in run.events if e.get("kind") == "llm_call")
    return {
        "id": run.run_id,
        "condition": str(first.get("condition") or run.path.parent.name),
        "seed": first.get("seed"),
        "status": status,
        "events": len(run.events),
        "subruns": len(subruns),
        "rounds": rounds,
        "completed": completed,
        "terminated": terminated,
        "llm_calls": llm,
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


def _rel(path: Path, root: Path) -> str:
    try:
        rel = path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        rel = path.name
    return rel if rel != "." else root.resolve().name


def _write_run(
    n: int,
    run: RunLog,
    root: Path,
    runs_dir: Path,
    labels: Mapping[str, Any],
    label_problem: str | None,
    caches: _Caches,
    secrets: list[str],
) -> dict[str, Any]:
    """Write `runs_dir/<n>.js` for one run (unless it is unreadable); return its index entry."""
    rel = _rel(run.path, root)
    entry: dict[str, Any] = {"n": n, "path": rel}
    if run.fatal is not None:
        entry.update(id=rel, condition=run.path.parent.name, status="unreadable", error=run.fatal)
        return entry
    entry.update(_summary(run))
    entry["problems"] = list(run.problems) + ([label_problem] if label_problem else [])
    entry["file"] = f"data/runs/{n:06d}.js"
    payload = {
        "n": n,
        "summary": entry,
        "events": [_compact(e, secrets) for e in run.events],
        "labels": labels.get(run.run_id, {}),
        "llm": _llm_texts(run, root, caches, secrets),
    }
    body = _js_json(payload)
    for prefix, name in _path_names(root):  # no absolute path of this machine in a shared page
        body = body.replace(prefix, name)
    (runs_dir / f"{n:06d}.js").write_text(f"MBB.run({n},{body});\n", encoding="utf-8")
    return entry


def build_viewer(root: str | Path, out: str | Path | None = None) -> ViewerResult:
    """Write the viewer of every run under `root` to `out` (default `root/viewer`)."""
    t0 = time.perf_counter()
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a folder")
    out = Path(out) if out is not None else root / "viewer"
    data = out / "data"
    runs_dir = data / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    for old in runs_dir.glob("*.js"):  # a rebuild never leaves a previous run's file behind
        old.unlink()
    secrets = _env_secrets()
    paths = _path_names(root)
    run_dirs = find_runs(root, exclude=[out])
    caches = _Caches()
    entries: list[dict[str, Any]] = []
    bad: list[tuple[str, str]] = []
    warnings: list[tuple[str, str]] = []
    try:
        # in chunks: memory stays bounded by a chunk's events, whatever the number of runs
        for first in range(0, len(run_dirs), _CHUNK):
            runs = [read_run(d) for d in run_dirs[first : first + _CHUNK]]
            labels, label_problem = _labels(runs)
            for n, run in enumerate(runs, start=first):
                entry = _write_run(n, run, root, runs_dir, labels, label_problem, caches, secrets)
                for prefix, name in paths:
                    entry["path"] = entry["path"].replace(prefix, name)
                if entry["status"] == "unreadable":
                    bad.append((entry["path"], entry["error"]))
                warnings += [(entry["path"], p) for p in entry.get("problems", ())]
                entries.append(entry)
    finally:
        caches.close()
    index = {
        "root": root.resolve().name,
        "built": time.strftime("%Y-%m-%d %H:%M", time.localtime()),
        "runs": entries,
        "message": None
        if run_dirs
        else f"no runs in {root.resolve().name}/: no folder under it holds an events.jsonl",
    }
    (data / "index.js").write_text(f"MBB.index({_js_json(index)});\n", encoding="utf-8")
    page = (STATIC / "viewer.html").read_text(encoding="utf-8")
    page = page.replace("/*MBB_CSS*/", (STATIC / "viewer.css").read_text(encoding="utf-8"))
    page = page.replace("/*MBB_JS*/", (STATIC / "viewer.js").read_text(encoding="utf-8"))
    index_path = out / "index.html"
    index_path.write_text(page, encoding="utf-8")
    return ViewerResult(index_path, len(entries), bad, warnings, time.perf_counter() - t0)
