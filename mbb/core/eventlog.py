"""The event log: an append-only JSONL file of one run's events (`mbb.core.events`), and the
readers that check it.

Each event is one JSON line in `events.jsonl`, written and flushed as it happens, so a crash
loses at most the line being written. A log is read back only whole and checked: every line an
event of a known kind, `seq` counting 0, 1, 2, ..., one run id throughout.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pydantic_core import PydanticSerializationError, SchemaSerializer, core_schema

from mbb.core.events import EVENT_KINDS, EventBase
from mbb.core.nested import comparable_params

__all__ = [
    "KILL_ENV",
    "EventLog",
    "EventLogError",
    "ResumeMismatch",
    "check_lines",
    "comparable",
    "kind_of",
    "read_events",
    "read_lines",
]


class ResumeMismatch(RuntimeError):
    """Re-running a run from its seed did not reproduce the events already in its log."""


class EventLogError(ValueError):
    """An events.jsonl that is not one run's continuous log; the message names file and line."""


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


_LLM_VOLATILE = ("wall", "latency_s", "attempts", "cache_hit")


def comparable(line: str) -> str:
    """An event line without what may differ between two executions of the same run: the wall
    clock; in run_started the provenance of the code that ran it; in llm_call how the answer was
    obtained (latency, attempts, cache hit) — a resumed run gets from the cache what the
    interrupted one fetched, with the same content."""
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
            if resume and path.is_file():
                self._recorded = read_lines(path)
                with path.open("r+", encoding="utf-8") as fh:  # drop a partial trailing line
                    fh.truncate(sum(len(x.encode()) + 1 for x in self._recorded))
                self._fh = path.open("a", encoding="utf-8")
            else:
                self._fh = path.open("w", encoding="utf-8")
        self._replay_end = len(self._recorded)  # events before this are checked, not written
        kill = os.environ.get(KILL_ENV)
        self._kill_after = int(kill) if kill else None
        self._checked = self._replay_end > 0 or self._kill_after is not None  # see `_append`
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
            recorded = self._recorded[seq]
            if comparable(line) != comparable(recorded):
                raise ResumeMismatch(
                    f"{self.run_id}: event {seq} differs from the log being resumed\n"
                    f"  recorded: {recorded[:300]}\n  re-run:   {line[:300]}"
                )
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


def kind_of(line: str) -> str:
    """The kind of a serialized event line, read from its fixed prefix `{"kind":"...`."""
    return line[9 : line.index('"', 9)]


def read_lines(path: str | Path, *, check: bool = True) -> list[str]:
    """The complete lines of an events.jsonl file; a partial trailing line (crash) is dropped.

    With `check` (the default) the log is verified first: every line is a JSON event of a known
    kind, `seq` counts 0, 1, 2, ... and every line has the first
    line's run_id — a corrupt, duplicated, missing or foreign line raises `EventLogError`
    naming the file and line, so nothing is silently counted into tables."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise EventLogError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    lines = text.split("\n")[:-1]  # the last piece is "" or an unterminated line
    while lines and not lines[-1]:  # blank lines at the end (an editor's) are not events
        lines.pop()
    if check:
        check_lines(path, lines)
    return lines


def check_lines(path: str | Path, lines: Sequence[str]) -> None:
    """Raise `EventLogError` at the first line that breaks the log (see `read_lines`)."""
    run_id = None
    for i, line in enumerate(lines):
        where = f"{path}:{i + 1}"
        try:
            d = json.loads(line)
        except ValueError:
            what = "an empty line" if not line.strip() else "not valid JSON"
            raise EventLogError(f"{where}: {what} (a corrupt log)") from None
        kind = d.get("kind") if isinstance(d, dict) else None
        if kind not in EVENT_KINDS or not line.startswith('{"kind":"'):
            raise EventLogError(f"{where}: not an mbb event (kind {str(kind)[:40]!r})")
        if i == 0:
            run_id = d.get("run_id")
        elif d.get("run_id") != run_id:
            other = d.get("run_id")
            raise EventLogError(
                f"{where}: an event of another run ({str(other)[:60]!r} in the log of {run_id!r})"
                if other is not None
                else f"{where}: an event without a run_id"
            )
        if d.get("seq") != i:
            raise EventLogError(
                f"{where}: seq {str(d.get('seq'))[:20]} where {i} was expected (a duplicated, "
                "missing or reordered line)"
            )


def read_events(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the records of an events.jsonl file as dicts."""
    for line in read_lines(path):
        yield json.loads(line)
