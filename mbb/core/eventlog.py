"""The event log: an append-only JSONL file of one run's events (`mbb.core.events`), and the
one strict parser that reads it back.

Each event is one JSON line in `events.jsonl`, written and flushed as it happens, so a crash
loses at most the line being written. A log is read back only whole and checked (`read_lines`):
every line one event of a known kind with exactly its fields, each of its type and range, no key
given twice, `seq` counting 0, 1, 2, ..., one run id throughout. A log is hostile input (run
folders are shared), so the check is the parser the tables use: what it accepts is handed on in
the writer's own form (`_READER`), which polars reads to the same values the check validated.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import stat
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pydantic_core import (
    PydanticSerializationError,
    SchemaSerializer,
    SchemaValidator,
    ValidationError,
    core_schema,
)

from mbb.core import safejson
from mbb.core.events import EVENT_ADAPTER, SCHEMA_VERSION, EventBase
from mbb.core.nested import comparable_params

__all__ = [
    "KILL_ENV",
    "MAX_LINE_CHARS",
    "TEXT_LIMIT_MAX",
    "EventLog",
    "EventLogError",
    "OtherVersion",
    "ResumeMismatch",
    "check_lines",
    "comparable",
    "folder_problem",
    "kind_of",
    "parse_line",
    "read_events",
    "read_lines",
    "read_log_bytes",
]


class ResumeMismatch(RuntimeError):
    """Re-running a run from its seed did not reproduce the events already in its log."""


class EventLogError(ValueError):
    """An events.jsonl that is not one run's continuous log; the message names file and line."""


class OtherVersion(ValueError):
    """A line that is an event of another schema version (`version`, as written, cut): a reader
    that tolerates bad lines (the viewer) reports such lines together, not one by one."""

    def __init__(self, message: str, version: str) -> None:
        super().__init__(message)
        self.version = version


@dataclass(frozen=True, slots=True)
class _Writer:
    """How `EventLog.record` writes one event class without validating it."""

    template: dict[str, Any]  # every field in the model's order: its default, or _REQUIRED
    size: int  # fields of the model: an unknown field given to `record` makes the dict longer
    serializer: SchemaSerializer  # a typed-dict twin of the model's schema: the same bytes


class _Required:
    """A required field not given to `record`: no serializer can write it, so it raises."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<required>"


_REQUIRED = _Required()
_WRITERS: dict[type[EventBase], _Writer] = {}


def _dicts_for_models(schema: Any) -> Any:
    """A core schema with every model in it replaced by a typed dict of its fields: `record` is
    given nested values as dicts (in field order), and serializes them like the models."""
    if isinstance(schema, list):
        return [_dicts_for_models(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    if schema.get("type") == "model":
        fields = schema["schema"]["fields"]
        return core_schema.typed_dict_schema(
            {
                n: core_schema.typed_dict_field(_dicts_for_models(f["schema"]))
                for n, f in fields.items()
            }
        )
    return {k: _dicts_for_models(v) for k, v in schema.items()}


def _writer(cls: type[EventBase]) -> _Writer:
    """The writer of `cls`, built once."""
    w = _WRITERS.get(cls)
    if w is None:
        info = cls.model_fields
        w = _WRITERS[cls] = _Writer(
            template={
                n: _REQUIRED if f.is_required() else f.get_default(call_default_factory=True)
                for n, f in info.items()
            },
            size=len(info),
            serializer=SchemaSerializer(_dicts_for_models(cls.__pydantic_core_schema__)),
        )
    return w


_WALL = re.compile(r'"wall":[-+0-9.eE]+')
KILL_ENV = "MBB_FAULT_KILL_AFTER"  # test hook: SIGKILL the process after writing N events


# how an answer was obtained, not what it was: a call re-made on resuming (its cache entry
# gone) may find the server's prompt cache warm, so its cached tokens and cost differ for the
# same answer (a red team's resume stopped on exactly that)
_LLM_VOLATILE = ("wall", "latency_s", "attempts", "cache_hit", "cached_tokens", "cost_usd")


def _difference(recorded: str, rerun: str) -> str:
    """Which fields of two event lines differ (their kinds, when those do), for a
    ResumeMismatch: e.g. "fields that differ: text" or "a ballot where the log has a turn"."""
    try:
        a, b = json.loads(recorded), json.loads(rerun)
    except ValueError:
        return "not comparable"
    if a.get("kind") != b.get("kind"):
        return f"a {b.get('kind')} event where the log has a {a.get('kind')}"
    volatile = {"wall", "provenance", *(_LLM_VOLATILE if a.get("kind") == "llm_call" else ())}
    fields = sorted(k for k in a.keys() | b.keys() if k not in volatile and a.get(k) != b.get(k))
    return f"{a.get('kind')}: fields that differ: {', '.join(fields) or 'none'}"


def comparable(line: str) -> str:
    """An event line without what may differ between two executions of the same run: the wall
    clock; in run_started the provenance of the code that ran it; in llm_call how the answer was
    obtained (latency, attempts, cache hit, tokens served from the server's cache and so the
    cost) — a resumed run gets from the cache what the interrupted one fetched, with the same
    content."""
    if line.startswith('{"kind":"run_started"'):
        d = json.loads(line)
        d.pop("wall", None)
        d.pop("provenance", None)
        if isinstance(d.get("params"), dict):  # the same model served elsewhere: the same run
            d["params"] = comparable_params(d["params"])
        return json.dumps(d, sort_keys=True)
    if line.startswith('{"kind":"llm_call"'):
        d = json.loads(line)
        for k in _LLM_VOLATILE:
            d.pop(k, None)
        if d.get("served_model") is None:  # null, or a log written before mbb recorded it
            d.pop("served_model", None)
        if not d.get("usage_implausible"):  # false, or a log written before mbb recorded it
            d.pop("usage_implausible", None)
        return json.dumps(d, sort_keys=True)
    return _WALL.sub("", line)


class EventLog:
    """Appends events to a JSONL file (flushed per round) and keeps their lines in memory.

    Lines are kept grouped by kind so tables can be built without re-parsing the whole log.

    Resume (`resume=True`): the log is the checkpoint. The complete lines already in the file are
    kept (a partial trailing line from a crash is cut off); the run is re-executed from its seed,
    and each event it emits is checked against the recorded one at the same position instead of
    being written again — a mismatch raises `ResumeMismatch` — until the record is exhausted;
    from there on events are appended as usual. Nothing is duplicated or lost.
    """

    def __init__(self, run_id: str, path: Path | None = None, *, resume: bool = False) -> None:
        self.run_id = run_id
        self.path = path
        self.seq = 0
        self.lines: list[str] = []
        self.by_kind: dict[str, list[str]] = defaultdict(list)
        self._fh: TextIO | None = None
        self._recorded: list[str] = []
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            _no_link(path.parent)  # a run folder planted as a link would write elsewhere
            _no_link(path)
            if resume and path.is_file():
                raw = _raw_lines(path)
                self._recorded = check_lines(path, raw)
                self._fh = _open_for_writing(path, append=True)
                self._fh.truncate(sum(len(x.encode()) + 1 for x in raw))  # a partial last line
            else:
                self._fh = _open_for_writing(path, append=False)
        self._replay_end = len(self._recorded)  # events before this are checked, not written
        kill = os.environ.get(KILL_ENV)
        self._kill_after = int(kill) if kill else None
        self._checked = self._replay_end > 0 or self._kill_after is not None  # see `_append`
        # the first difference found on resuming: the events after it (the run's own failure)
        # are refused with its message, which says what differed
        self._mismatch: str | None = None
        self.subrun: int | None = None
        self.round: int | None = None
        self.t = 0.0
        self._batch: list[tuple[type[EventBase], str | None, dict[str, Any]]] | None = None

    @property
    def replaying(self) -> bool:
        """True while re-executed events are still being matched against the record."""
        return self.seq < self._replay_end

    def begin_batch(self) -> None:
        """Hold events emitted by concurrent calls (a gathered phase) until `end_batch`, so the
        log's order does not depend on which call finished first."""
        self._batch = []

    def discard_batch(self) -> None:
        """Drop the held events (a phase that did not complete)."""
        self._batch = None

    def end_batch(self, worker_order: Sequence[str]) -> None:
        """Emit the held events by worker (in `worker_order`), each worker's in its own order."""
        batch, self._batch = self._batch, None
        # an event without a worker (None) is not in the order: it sorts after every worker's
        rank: dict[str | None, int] = {w: i for i, w in enumerate(worker_order)}
        for _, (cls, worker, fields) in sorted(
            enumerate(batch or ()), key=lambda x: (rank.get(x[1][1], len(rank)), x[0])
        ):
            self.emit(cls, worker, **fields)

    def emit(
        self, cls: type[EventBase], worker: str | None = None, **fields: Any
    ) -> EventBase | None:
        """Validate one event against its model, append it, and return it (None while a batch
        holds it)."""
        if self._batch is not None:
            fields.setdefault("t", self.t)
            fields.setdefault("subrun", self.subrun)
            fields.setdefault("round", self.round)
            self._batch.append((cls, worker, fields))
            return None
        # the model's own validator and serializer, called directly: same checks and bytes as
        # cls(**data).model_dump_json() without pydantic's per-call Python wrappers
        data = {
            "run_id": self.run_id,
            "seq": self.seq,
            "t": self.t,
            "subrun": self.subrun,
            "round": self.round,
            "worker": worker,
            "wall": time.time(),
        }
        data.update(fields)  # an explicit t / subrun / round wins
        event = cls.__pydantic_validator__.validate_python(data)
        self._append(event.kind, cls.__pydantic_serializer__.to_json(event).decode())
        return event

    def record(self, cls: type[EventBase], worker: str | None = None, **fields: Any) -> None:
        """Append one event built by trusted, typed code (the arena's own) without validating
        it: the fields are laid out in the model's order and written by its schema's serializer,
        so the line is the one `emit` writes (floats given as ints become floats). A missing or
        unknown field raises; a wrong type or value is caught by the test that validates every
        kind an arena run writes. Nested models are given as dicts; a held batch goes to `emit`."""
        if self._batch is not None:
            self.emit(cls, worker, **fields)
            return
        w = _WRITERS.get(cls) or _writer(cls)
        data = w.template.copy()  # keys set below keep their place: the model's order
        data["run_id"] = self.run_id
        data["seq"] = self.seq
        data["t"] = self.t
        data["subrun"] = self.subrun
        data["round"] = self.round
        data["worker"] = worker
        data["wall"] = time.time()
        data.update(fields)  # an explicit t / subrun / round wins
        if len(data) != w.size:
            raise TypeError(f"{cls.__name__}: unknown fields {sorted(data.keys() - w.template)}")
        try:
            line = w.serializer.to_json(data).decode()
        except PydanticSerializationError:
            missing = [k for k, v in data.items() if v is _REQUIRED]
            if missing:
                raise TypeError(f"{cls.__name__}: missing fields {missing}") from None
            raise
        if self._checked:  # a resumed log, or the fault hook
            self._append(data["kind"], line)
            return
        if self._fh is not None:  # the common case, inline: it runs for every event of a run
            self._fh.write(line + "\n")
        self.seq += 1
        self.lines.append(line)
        self.by_kind[data["kind"]].append(line)

    def _append(self, kind: str, line: str) -> None:
        seq = self.seq
        if seq < self._replay_end:
            if self._mismatch is not None:  # the run ending on it: say the first difference
                raise ResumeMismatch(self._mismatch)
            recorded = self._recorded[seq]
            if comparable(line) != comparable(recorded):
                self._mismatch = (
                    f"{self.run_id}: event {seq} differs from the log being resumed "
                    f"({_difference(recorded, line)})\n"
                    f"  recorded: {recorded[:300]}\n  re-run:   {line[:300]}"
                )
                raise ResumeMismatch(self._mismatch)
            line = recorded  # keep the original (its wall time)
        elif self._fh is not None:
            self._fh.write(line + "\n")
            if self._kill_after is not None and seq + 1 >= self._kill_after:
                self._fh.flush()
                os.kill(os.getpid(), signal.SIGKILL)
        self.seq = seq + 1
        self.lines.append(line)
        self.by_kind[kind].append(line)

    def flush(self) -> None:
        """Push written lines to the OS. The arena flushes after every round and at every
        subrun boundary: a crash loses at most the round in flight, which `resume` re-derives
        (deterministically) rather than losing — a per-line flush doubled the cost of a run."""
        if self._fh is not None:
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _no_link(path: Path) -> None:
    if path.is_symlink():
        raise EventLogError(
            f"{path}: a symbolic link; mbb writes a run's log only into a folder of its own "
            "(a link in a shared folder could point anywhere)"
        )


def _open_for_writing(path: Path, *, append: bool) -> TextIO:
    """The log opened for writing, never through a link (O_NOFOLLOW: one planted after the
    check is refused too) and only as a regular file: a named pipe left in a shared folder
    blocked `mbb run` and a study's resume for ever (opened non-blocking, then refused)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    flags |= os.O_APPEND if append else 0
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            _no_link(path)
        if exc.errno == errno.ENXIO:  # a pipe nobody reads
            raise EventLogError(f"{path}: {_NOT_REGULAR}") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise EventLogError(f"{path}: {_NOT_REGULAR}")
        if not append:
            os.ftruncate(fd, 0)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "a" if append else "w", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


_NOT_REGULAR = "not a regular file (a pipe or a device); mbb writes a run's log only as a file"


def kind_of(line: str) -> str:
    """The kind of a serialized event line, read from its fixed prefix `{"kind":"...`."""
    return line[9 : line.index('"', 9)]


# --- the one strict parser ----------------------------------------------------------------------
_INT64 = (-(2**63), 2**63 - 1)  # what a table column holds: a larger number is refused, not cut
_SIGNED = frozenset({"exit_code", "expected_exit"})  # a process killed by signal N exits -N
_UNIT = frozenset({"progress", "score"})  # shares of a whole
# An intent is `dict[str, Any]` in the schema, but the tables read five of its keys as typed
# columns (`mbb.core.tables._INTENT`): the parser types them the same way, so a value polars
# could not read as its column is refused here, with its line, and never reaches polars.
_INTENT_KEYS = {"kind": "str", "peer": "str", "rule": "str", "commitment": "str", "value": "float"}


def _intent_schema() -> Any:
    def typed(kind: str) -> Any:
        if kind == "str":
            return core_schema.str_schema()
        return core_schema.float_schema(allow_inf_nan=False)

    return core_schema.typed_dict_schema(
        {
            k: core_schema.typed_dict_field(core_schema.nullable_schema(typed(v)), required=False)
            for k, v in _INTENT_KEYS.items()
        },
        extra_behavior="allow",
    )


def _reading(schema: Any, name: str | None = None) -> Any:
    """The typed-dict twin of an event schema (as `_dicts_for_models`), tightened for reading:
    no field the model does not have; every number within int64 and finite; non-negative but
    for exit codes (counts, amounts, times, positions, tokens, costs); progress and score
    within [0, 1]; `v` this schema's version; intents typed as the tables read them."""
    if isinstance(schema, list):
        return [_reading(x, name) for x in schema]
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if kind == "model":
        fields = schema["schema"]["fields"]
        return core_schema.typed_dict_schema(
            {n: core_schema.typed_dict_field(_reading(f["schema"], n)) for n, f in fields.items()},
            extra_behavior="forbid",
        )
    if kind == "list" and name == "intents":
        return core_schema.list_schema(_intent_schema())
    if kind in ("int", "float"):
        out = dict(schema)
        lo = _INT64[0] if name in _SIGNED else 0
        hi = 1 if name in _UNIT else _INT64[1]
        if name == "v":
            lo = hi = SCHEMA_VERSION
        out["ge"] = max(out.get("ge", lo), lo)
        out["le"] = min(out.get("le", hi), hi)
        if kind == "float":
            out["allow_inf_nan"] = False
        return out
    return {k: _reading(v, name) for k, v in schema.items()}


@dataclass(frozen=True, slots=True)
class _Reader:
    validator: SchemaValidator
    # per kind, the writer's form of what `validator` accepted (one serializer per kind: the
    # union's would try its choices in turn, twice the cost)
    serializers: dict[str, SchemaSerializer]


_READERS: list[_Reader] = []


def _reader() -> _Reader:
    if not _READERS:  # built on first use: `mbb --help` and the pool's workers never pay it
        schema = _reading(EVENT_ADAPTER.core_schema)
        kinds = {k: SchemaSerializer(choice) for k, choice in schema["choices"].items()}
        _READERS.append(_Reader(SchemaValidator(schema), kinds))
    return _READERS[0]


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return d


def _duplicate_key(line: str) -> str | None:
    """The first key given twice in one object of `line` (at any depth), or None."""
    try:
        json.loads(line, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        return str(exc)
    except (ValueError, RecursionError):
        return None  # the validator parsed it: not reached for JSON it refuses
    return None


def _failure(exc: ValidationError) -> ValueError:
    """Why a line is not an event, in one line (the first problem; input shown cut): an
    `OtherVersion` when its `v` is another version (said before its other problems: an older
    event's fields differ for that reason), else a ValueError."""
    errors = exc.errors(include_url=False)
    err = errors[0]
    kind, loc = err["type"], [str(p) for p in err["loc"]]
    if kind == "json_invalid":
        if "recursion limit" in str(err.get("msg")):  # pydantic's parser stops at 200 levels
            return ValueError("nested too deeply to be an mbb event (a corrupt or hostile log)")
        return ValueError("not valid JSON (a corrupt log)")
    if kind in ("union_tag_invalid", "union_tag_not_found", "dict_type", "model_type"):
        tag = err.get("ctx", {}).get("tag") if kind == "union_tag_invalid" else None
        return ValueError(
            f"not an mbb event (kind {str(tag)[:40]!r})" if tag else "not an mbb event"
        )
    for other in errors:
        where = [str(p) for p in other["loc"]]
        if where[-1:] == ["v"] and len(where) == 2:  # the event's own `v`
            version = str(other.get("input"))[:20]
            return OtherVersion(
                f"{'.'.join(where)}: an event of schema version {version}, not {SCHEMA_VERSION}",
                version,
            )
    shown = ""
    if kind != "missing" and not isinstance(err.get("input"), dict | list):
        shown = f" (got {repr(err.get('input'))[:60]})"
    return ValueError(f"{'.'.join(loc) or '(event)'}: {err['msg']}{shown}")


# the longest line read as an event (mbb's choice), in characters: the longest line of 1,305 logs
# of mbb's (scripted, LLM and real-task runs) was a run_started of 5,626; texts are cut to their
# params' limits (each at most TEXT_LIMIT_MAX characters), commands to 2,000, answers' details to
# 500, and no event carries a command's output or a model's prompt. A 50 MiB message inside the
# log cap had cost `mbb view` 138 s, and 200 MiB a MemoryError.
MAX_LINE_CHARS = 1 << 20
# the largest text limit a condition may set (a note, a message, a ballot's reasoning, a scratch;
# 80 times the default message's), so that a text of mbb's fits a line even when each character
# is written escaped (12 characters for one outside the BMP, as a JSON writer may)
TEXT_LIMIT_MAX = 50_000


def _too_long(line: str) -> str:
    return (
        f"a line of {len(line):,} characters, longer than any event mbb writes (at most "
        f"{MAX_LINE_CHARS:,} read, mbb's choice): a corrupt or hostile log"
    )


def parse_line(line: str) -> tuple[dict[str, Any], str]:
    """(the event's fields, the line as mbb's writer writes them) — or ValueError saying why
    `line` is not one event: not JSON, an unknown kind, a missing or unknown field, a wrong
    type, a number out of range, a key given twice. A line mbb wrote comes back unchanged; an
    equivalent one written otherwise (key order, spacing) comes back in the writer's form, so
    every reader after this one (polars) reads exactly the values checked here. A line longer
    than MAX_LINE_CHARS is refused unread."""
    if len(line) > MAX_LINE_CHARS:
        raise ValueError(_too_long(line))
    reader = _reader()
    try:
        fields = reader.validator.validate_json(line, strict=True)
    except ValidationError as exc:
        _refuse_duplicates(line)  # the likelier cause (a second `kind`, say), said first
        raise _failure(exc) from None
    canonical = reader.serializers[fields["kind"]].to_json(fields).decode()
    if canonical != line:  # mbb's own lines never take this path
        _refuse_duplicates(line)
        return fields, canonical
    return fields, line  # the same text: keep one copy


def _refuse_duplicates(line: str) -> None:
    dup = _duplicate_key(line)
    if dup is not None:
        raise ValueError(
            f"the key {dup[:40]!r} is given twice in one object (readers would disagree on "
            "its value)"
        )


# the largest log read (mbb's choice): a run of mbb's writes a few MB at most; a larger file in
# a received folder (an 8 GB sparse file) was read whole and ended in a MemoryError
MAX_LOG_BYTES = 1 << 30


def read_log_bytes(path: Path) -> bytes:
    """The bytes of the log file `path`, or EventLogError naming it and why it is not read: a
    symbolic link (in a shared folder it could point at any file of the reader's), something
    other than a regular file (a pipe would block the reader for ever), or a file larger than
    MAX_LOG_BYTES. Each is checked on the open file, so a log swapped after a check is not
    read either. A missing file raises FileNotFoundError (the reader's own error).

    path: the events.jsonl file."""
    try:
        with safejson.open_binary(path, follow_links=False) as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_LOG_BYTES:
                raise EventLogError(
                    f"{path}: {size / 2**30:.1f} GiB, larger than any log mbb writes "
                    f"(at most {MAX_LOG_BYTES >> 30} GiB read): not read"
                )
            return fh.read()
    except safejson.NotRegularFile:
        raise EventLogError(
            f"{path}: not a regular file (a symbolic link or a pipe): not read"
        ) from None


def _raw_lines(path: Path) -> list[str]:
    raw = read_log_bytes(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EventLogError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    lines = text.split("\n")[:-1]  # the last piece is "" or an unterminated line
    while lines and not lines[-1]:  # blank lines at the end (an editor's) are not events
        lines.pop()
    return lines


def read_lines(path: str | Path, *, check: bool = True) -> list[str]:
    """The complete lines of an events.jsonl file; a partial trailing line (crash) is dropped.

    With `check` (the default) the log is parsed strictly first (`check_lines`): a line that is
    not one valid event, or breaks the sequence, raises `EventLogError` naming the file and
    line, so nothing is silently counted into tables. The lines returned are those the check
    accepted, in mbb's writer's form (`parse_line`)."""
    path = Path(path)
    lines = _raw_lines(path)
    return check_lines(path, lines) if check else lines


def check_lines(path: str | Path, lines: Sequence[str]) -> list[str]:
    """The lines, each parsed as `parse_line` does (and in the writer's form, none longer than
    MAX_LINE_CHARS), `seq` counting
    0, 1, 2, ... and one run id throughout; `EventLogError` naming the file and the first line
    that breaks the log. (`parse_line` inlined: this loop runs for every event read.)"""
    reader = _reader()
    validate, serializers = reader.validator.validate_json, reader.serializers
    run_id = None
    out: list[str] = []
    append = out.append
    for i, line in enumerate(lines):
        if len(line) > MAX_LINE_CHARS:  # before the parser spends time and memory on it
            raise EventLogError(f"{path}:{i + 1}: {_too_long(line)}")
        try:
            d = validate(line, strict=True)
            canonical = serializers[d["kind"]].to_json(d).decode()
            if canonical != line:  # mbb's own lines never take this path
                _refuse_duplicates(line)
                line = canonical
        except (ValidationError, ValueError) as exc:
            where = f"{path}:{i + 1}"
            if not line.strip():
                raise EventLogError(f"{where}: an empty line (a corrupt log)") from None
            _refuse_duplicates_at(where, line)
            reason = str(_failure(exc)) if isinstance(exc, ValidationError) else str(exc)
            raise EventLogError(f"{where}: {reason}") from None
        if d["seq"] != i or (i and d["run_id"] != run_id):
            where = f"{path}:{i + 1}"
            if i and d["run_id"] != run_id:
                raise EventLogError(
                    f"{where}: an event of another run ({str(d['run_id'])[:60]!r} in the log of "
                    f"{str(run_id)[:60]!r})"
                )
            raise EventLogError(
                f"{where}: seq {d['seq']} where {i} was expected (a duplicated, missing or "
                "reordered line)"
            )
        if not i:
            run_id = d["run_id"]
        append(line)
    return out


def _refuse_duplicates_at(where: str, line: str) -> None:
    try:
        _refuse_duplicates(line)
    except ValueError as exc:
        raise EventLogError(f"{where}: {exc}") from None


# the characters of the run ids mbb writes: params `name`s and model names, `-seedNNNN`, and a
# mechanism replay's `~<mechanism>`
RUN_ID_CHARS = re.compile(r"[A-Za-z0-9_.~-]+")


def folder_problem(run_dir: str | Path, run_id: str) -> str | None:
    """Why the run folder `run_dir` cannot hold a log of the run `run_id` (one line, names
    shown escaped), or None: mbb names a run's folder by its run id, and every reader counts a
    run in the condition its folder's name says, so a renamed or copied folder would be counted
    in another cell; a name with characters mbb never writes (an escape sequence, a newline) is
    no folder of mbb's either. The one rule of `mbb tables`, `mbb view` and `load_runs`.

    run_dir: the run folder; run_id: the run id its log's events carry."""
    name = Path(os.path.abspath(run_dir)).name  # `.` is the folder it names
    if run_id != name:
        return f"its log is of run {str(run_id)[:60]!r}, not of a run named as its folder"
    if not RUN_ID_CHARS.fullmatch(name):
        return f"run id {name[:60]!r} holds characters mbb never writes"
    return None


def read_events(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the records of an events.jsonl file as dicts."""
    for line in read_lines(path):
        yield json.loads(line)
