"""The event log: schema round-trip, crash-safe reading, kinds, and the failure record."""

from __future__ import annotations

import json
import typing

import pytest
from helpers import condition
from pydantic import ValidationError

from mbb.batch.build import run_condition
from mbb.core import eventlog
from mbb.core import events as ev
from mbb.core.actions import Withdraw

SMALL = {"name": "ev", "workers": {"count": 3}, "subruns": 2, "deadline": {"minutes": 6}}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("events")
    res = run_condition(condition(SMALL), 7, out)
    return res


def test_events_round_trip_through_the_schema(run_dir) -> None:
    """events.jsonl -> parse_events -> model_dump_json gives back the very same lines."""
    lines = eventlog.read_lines(run_dir.out_dir / "events.jsonl")
    assert lines == run_dir.log.lines and len(lines) > 30
    parsed = ev.parse_events(lines)
    assert [p.model_dump_json() for p in parsed] == lines
    assert [type(p) for p in parsed] == [ev.EVENT_KINDS[eventlog.kind_of(ln)] for ln in lines]
    assert {p.v for p in parsed} == {ev.SCHEMA_VERSION}
    assert {p.run_id for p in parsed} == {run_dir.run_id}


def test_kind_of_reads_the_kind_prefix(run_dir) -> None:
    for line in run_dir.log.lines:
        assert line.startswith('{"kind":"')
        assert eventlog.kind_of(line) == json.loads(line)["kind"]
    assert sum(len(v) for v in run_dir.log.by_kind.values()) == len(run_dir.log.lines)
    for kind, lines in run_dir.log.by_kind.items():
        assert {eventlog.kind_of(ln) for ln in lines} == {kind}


def test_read_events_yields_dicts(run_dir) -> None:
    records = list(eventlog.read_events(run_dir.out_dir / "events.jsonl"))
    assert [r["seq"] for r in records] == list(range(len(records)))


@pytest.mark.parametrize(
    ("tail", "kept"),
    [("", 3), ('{"kind":"run_en', 3), ('{"kind":"run_ended","v":1}', 3), ("\n", 3)],
    ids=["clean", "partial", "unterminated-json", "blank-line"],
)
def test_read_lines_drops_a_partial_trailing_line(tmp_path, run_dir, tail, kept) -> None:
    lines = run_dir.log.lines[:3]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n" + tail, encoding="utf-8")
    assert eventlog.read_lines(path) == lines[:kept]


def test_read_lines_of_an_empty_file(tmp_path) -> None:
    (tmp_path / "e.jsonl").write_text("")
    assert eventlog.read_lines(tmp_path / "e.jsonl") == []


def test_every_event_class_has_a_unique_kind() -> None:
    kinds = [cls.model_fields["kind"].default for cls in ev.EVENT_KINDS.values()]
    union = typing.get_args(typing.get_args(ev.Event)[0])  # Annotated[Union[...], Field]
    assert len(kinds) == len(set(kinds)) == len(union)
    assert {c.model_fields["kind"].default for c in union} == set(kinds)
    assert all(k == cls.model_fields["kind"].default for k, cls in ev.EVENT_KINDS.items())


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(kind="teleported"),
        lambda d: d.update(surprise=1),
        lambda d: d.pop("run_id"),
        lambda d: d.update(seq=-1),
        lambda d: d.update(t=-0.5),
    ],
    ids=["unknown-kind", "extra-field", "missing-field", "negative-seq", "negative-t"],
)
def test_schema_rejects_malformed_events(run_dir, mutate) -> None:
    d = json.loads(run_dir.log.lines[1])
    mutate(d)
    with pytest.raises(ValidationError):
        ev.parse_events([json.dumps(d)])


def test_event_log_writes_lines_and_flushes_them(tmp_path) -> None:
    """Lines are written as events happen and pushed to the OS on flush() (the arena flushes
    after every round and subrun; a crash in between is recovered by `mbb resume`)."""
    path = tmp_path / "run" / "events.jsonl"
    log = eventlog.EventLog("r", path)
    log.t, log.subrun = 12.5, 1
    e0 = log.emit(ev.Requested, "W1", duration=30)
    log.flush()
    assert eventlog.read_lines(path) == [e0.model_dump_json()]  # on disk before close
    e1 = log.emit(ev.Withdrawn, "W1", reason="done", t=13.0)
    log.close()
    assert (e0.seq, e1.seq, e0.t, e1.t, e1.subrun) == (0, 1, 12.5, 13.0, 1)
    assert eventlog.read_lines(path) == log.lines


def test_a_crashing_run_ends_with_a_failed_run_ended(tmp_path, monkeypatch) -> None:
    """An exception outside the stated repair rules still leaves a valid, closed log."""
    from mbb.protocol import arena as arena_mod

    def broken(self, subrun):
        raise RuntimeError("sandbox missing")

    monkeypatch.setattr(arena_mod.Arena, "assign_tasks", broken)
    cond = condition(SMALL)
    with pytest.raises(RuntimeError, match="sandbox missing"):
        run_condition(cond, 0, tmp_path)
    lines = eventlog.read_lines(tmp_path / "ev-seed0000" / "events.jsonl")
    last = ev.parse_events(lines)[-1]
    assert last.kind == "run_ended" and last.status == "failed"
    assert "sandbox missing" in (last.error or "")
    assert [json.loads(ln)["seq"] for ln in lines] == list(range(len(lines)))


def test_a_solver_that_cannot_start_is_recorded_and_withdrawn(tmp_path, monkeypatch) -> None:
    from helpers import replace_backend

    from mbb.agents.backends import SOLVERS

    real = SOLVERS["modeled"].build

    def broken(run, spec, rng):
        solver = real(run, spec, rng)
        if spec.id == "W1":

            async def start_subrun(task, scratch):
                raise RuntimeError("sandbox missing")

            solver.start_subrun = start_subrun
        return solver

    replace_backend(monkeypatch, SOLVERS, "modeled", broken)
    result = run_condition(condition(SMALL), 0, tmp_path)
    events = ev.parse_events(result.log.lines)
    bad = [e for e in events if e.kind == "invalid_action" and e.worker == "W1"]
    assert bad and all(e.phase == "subrun start" and "sandbox missing" in e.detail for e in bad)
    withdrawn = [e for e in events if e.kind == "withdrawn" and e.worker == "W1"]
    assert len(withdrawn) == len([e for e in events if e.kind == "subrun_started"])
    assert events[-1].kind == "run_ended" and events[-1].status == "completed"


# --- the arena's unvalidated writer (EventLog.record) ---------------------------------------------
# written by backends through `emit`, or only by runs with LLM solvers on the charged clock
BACKEND_KINDS = {"command", "test_result", "llm_call", "thinking_charged"}


def _repairs_and_failures(monkeypatch) -> list[str]:
    """A run with every repair the arena records: clamped requests (int seconds where floats
    belong), an over-budget declaration, a failing ballot, a withdrawal, a failing evaluation."""
    from helpers import FixedSolver, PlainNegotiator, install_backends, run

    class Quits(FixedSolver):
        async def next_action(self, view):
            return Withdraw(reason="gave up") if view.now_s > 0 else await super().next_action(view)

    class NoScore(FixedSolver):
        async def evaluate(self):
            raise RuntimeError("grader crashed")

    def bad_vote(v):
        raise RuntimeError("ballot backend down")

    install_backends(
        monkeypatch,
        negotiators={
            "W1": lambda w: PlainNegotiator(w, bid=10**6),
            "W2": lambda w: PlainNegotiator(w, vote=bad_vote),
        },
        solvers={
            "W1": lambda w: FixedSolver(w, need=45, request=10**4, release_after=10),
            "W2": lambda w: Quits(w, need=400, request=5),
            "W3": lambda w: NoScore(w, need=30, request=60),
        },
    )
    cond = condition({"name": "repairs", "workers": {"count": 3}, "subruns": 2})
    return run(cond).lines


def test_every_kind_the_arena_writes_validates_and_round_trips(monkeypatch) -> None:
    """The arena records its own events without validating them (`EventLog.record`): every line
    of scripted, centralized, changing-population and repaired runs must parse through the full
    schema and serialize back to the very same line, so a wrong field type or value fails here."""
    from mbb.protocol.scheduling.centralized import CENTRALIZED

    small = {"workers": {"count": 4}, "subruns": 3, "deadline": {"minutes": 8}}
    conditions = [
        condition(small, name="scripted"),
        condition(small, name="memory_off", memory={"enabled": False}),
        condition(small, name="fixed", negotiation={"bids": "fixed", "conversation": False}),
        condition(
            small,
            name="population",
            population_changes=[
                {"subrun": 2, "remove": ["W2"], "add": [{"persona": "quitter"}]},
                {"subrun": 3, "add": [{"persona": "rule_maker", "deadline_min": 3}]},
            ],
        ),
        *(condition(small, name=k, mechanism={"kind": k}) for k in CENTRALIZED),
    ]
    lines = [ln for c in conditions for ln in run_condition(c, 3).log.lines]
    lines += _repairs_and_failures(monkeypatch)
    parsed = ev.parse_events(lines)
    assert [p.model_dump_json() for p in parsed] == lines
    assert {p.kind for p in parsed} == set(ev.EVENT_KINDS) - BACKEND_KINDS
    # the strict reader (types, ranges, no key twice) takes every line back as written
    assert [eventlog.parse_line(ln)[1] for ln in lines] == lines


def test_record_writes_what_emit_writes(monkeypatch) -> None:
    """Ints where floats belong become floats; defaults are filled in model order; nested models
    are given as dicts."""
    monkeypatch.setattr(eventlog.time, "time", lambda: 1234.5)
    ended = dict(position=2, start=30, used=12, allocation=60, reason="released", progress=1)
    at_start = dict(
        worker="W1", task="rev", work_s=160, budget=1000, deadline_s=1500, scratch_chars=0
    )
    lines = []
    for write in ("emit", "record"):
        log = eventlog.EventLog("r")
        log.t, log.subrun, log.round = 42, 1, 3
        getattr(log, write)(ev.WindowEnded, "W1", **ended)
        getattr(log, write)(ev.Declared, "W2", bid=5, duration=60, position=1, note="", t=50.0)
        getattr(log, write)(ev.SubrunStarted, workers=[at_start])
        lines.append(log.lines)
    assert lines[0] == lines[1]
    assert '"t":42.0' in lines[1][0] and '"start":30.0' in lines[1][0]
    assert '"work_s":160.0' in lines[1][2]


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"duration": 30, "bogus": 1}, r"unknown fields \['bogus'\]"),
        ({}, r"missing fields \['duration'\]"),
    ],
    ids=["unknown", "missing"],
)
def test_record_rejects_unknown_and_missing_fields(fields, match) -> None:
    with pytest.raises(TypeError, match=match):
        eventlog.EventLog("r").record(ev.Requested, "W1", **fields)
