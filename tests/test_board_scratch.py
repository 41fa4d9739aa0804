"""Board visibility and scratch memory, as primitives and as seen through a run's events."""

from __future__ import annotations

import pytest
from helpers import FixedSolver, PlainNegotiator, check_invariants, condition, install_backends, run

from mbb.core.board import Board
from mbb.core.scratch import Scratch


# --- board ----------------------------------------------------------------------------------------
def _board() -> Board:
    b = Board(readers=["A", "B", "C"])
    b.post("A", "public from A", to=None, subrun=1, round=1, turn=1)
    b.post("A", "A to B", to="B", subrun=1, round=1, turn=1)
    b.post("C", "C to A", to="A", subrun=1, round=2, turn=1)
    b.post("B", "public from B, subrun 2", to=None, subrun=2, round=1, turn=0, kind="note")
    return b


@pytest.mark.parametrize(
    ("reader", "expected"),
    [
        ("A", ["public from A", "A to B", "C to A", "public from B, subrun 2"]),
        ("B", ["public from A", "A to B", "public from B, subrun 2"]),
        ("C", ["public from A", "C to A", "public from B, subrun 2"]),
    ],
)
def test_private_posts_are_seen_only_by_author_and_recipient(reader, expected) -> None:
    assert [p.text for p in _board().visible_to(reader)] == expected


def test_visible_to_one_subrun_and_clear_visible_before() -> None:
    b = _board()
    assert [p.text for p in b.visible_to("B", subrun=1)] == ["public from A", "A to B"]
    b.clear_visible_before(2)
    for reader in ("A", "B", "C"):
        assert [p.text for p in b.visible_to(reader)] == ["public from B, subrun 2"]
    assert len(b.posts) == 4  # the record keeps everything
    b.post("C", "C to B", to="B", subrun=2, round=1, turn=1)
    assert [p.text for p in b.visible_to("A")] == ["public from B, subrun 2"]
    assert [p.text for p in b.visible_to("B")][-1] == "C to B"


def test_visible_to_returns_a_copy() -> None:
    b = _board()
    seen = b.visible_to("C")
    seen.clear()
    assert len(b.visible_to("C")) == 3


def test_newcomer_sees_earlier_public_posts_only() -> None:
    b = _board()
    b.add_reader("D")
    assert [p.text for p in b.visible_to("D")] == ["public from A", "public from B, subrun 2"]


@pytest.mark.parametrize(("author", "to"), [("Z", None), ("A", "Z")])
def test_unknown_author_or_recipient_is_refused(author, to) -> None:
    with pytest.raises(KeyError):
        _board().post(author, "x", to=to, subrun=1, round=1, turn=1)


def test_board_in_a_run_shows_each_negotiator_only_what_it_may_see(monkeypatch) -> None:
    """Negotiators record what they saw; a private message reaches only its two parties."""
    from mbb.core.actions import ConversationTurn, Message

    seen: dict[str, list[tuple[str, str | None, str]]] = {}

    def talk(v):
        seen.setdefault(v.worker, []).extend((p.author, p.to, p.text) for p in v.posts)
        if v.worker == "W1" and v.turn == 1:
            return ConversationTurn(
                messages=(Message(to="W2", text="secret for W2"), Message(text="hello all"))
            )
        return ConversationTurn()

    neg = {w: (lambda x: PlainNegotiator(x, converse=talk)) for w in ("W1", "W2", "W3")}
    sol = {w: (lambda x: FixedSolver(x, need=30, request=30)) for w in ("W1", "W2", "W3")}
    install_backends(monkeypatch, negotiators=neg, solvers=sol)
    cond = condition({"workers": {"count": 3}, "subruns": 1, "negotiation": {"max_turns": 2}})
    r = run(cond)
    secret = ("W1", "W2", "secret for W2")
    public = ("W1", None, "hello all")
    assert secret in seen["W2"] and public in seen["W2"]
    assert secret not in seen["W3"] and public in seen["W3"]
    msgs = r.of("message")
    assert [(m["worker"], m["to"], m["text"]) for m in msgs] == [secret, public]
    check_invariants(r, cond)


# --- scratch --------------------------------------------------------------------------------------
def test_scratch_is_bounded_and_drops_the_oldest_first() -> None:
    s = Scratch(max_chars=10)
    assert s.write("note", 1, "aaaa") == 0
    assert s.write("note", 1, "bbbb") == 0
    assert s.write("report", 2, "cccc") == 4  # 12 > 10: "aaaa" goes
    assert [e.text for e in s.entries] == ["bbbb", "cccc"] and s.chars == 8
    assert s.write("rule", 2, "x" * 25) == 8  # too long alone: truncated, everything else dropped
    assert [e.text for e in s.entries] == ["x" * 10] and s.chars == 10
    assert [e.kind for e in s.of_kind("rule")] == ["rule"]
    assert s.render() == "[negotiator's rule, subrun 2] " + "x" * 10
    s.wipe()
    assert s.entries == [] and s.chars == 0


def _writer_end(recap, scratch):
    if scratch is None:
        return
    for i in range(3):
        scratch.write("note", recap.subrun, f"{recap.worker} s{recap.subrun} note {i} " + "x" * 20)


@pytest.mark.parametrize("max_chars", [40, 1000])
def test_scratch_written_events_record_every_write_and_every_drop(monkeypatch, max_chars) -> None:
    """Every write is one scratch_written event with the chars it pushed out; replaying them
    reproduces scratch_chars at the next subrun start (regression: writes that overflowed the
    bound used to be partly missing from the log and dropped_chars was always 0)."""
    install_backends(
        monkeypatch,
        negotiators={w: (lambda x: PlainNegotiator(x, end=_writer_end)) for w in ("W1", "W2")},
        solvers={w: (lambda x: FixedSolver(x, need=30, request=30)) for w in ("W1", "W2")},
    )
    cond = condition(
        {"workers": {"count": 2}, "subruns": 3, "memory": {"enabled": True, "max_chars": max_chars}}
    )
    r = run(cond)
    chars = {"W1": 0, "W2": 0}
    for e in r.events:
        if e["kind"] == "subrun_started":
            assert {w["worker"]: w["scratch_chars"] for w in e["workers"]} == chars
        if e["kind"] == "scratch_written":
            chars[e["worker"]] += len(e["text"]) - e["dropped_chars"]
            assert e["accepted"]
    writes = r.of("scratch_written")
    assert len(writes) == 2 * 3 * 3
    assert (sum(e["dropped_chars"] for e in writes) > 0) == (max_chars == 40)
    assert r.arena.workers["W1"].scratch.chars == chars["W1"]
    check_invariants(r, cond)


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("reports", [True, False])
def test_memory_and_reports_are_separate_switches(enabled: bool, reports: bool) -> None:
    """Scripted population. Memory off and reports off: scratch_chars is 0 at every subrun start
    and nothing is written. Memory off, reports on (the paper's memory-off): only after-action
    reports are written and carried. Memory on, reports off: notes but no reports."""
    cond = condition(
        {
            "subruns": 3,
            "workers": {"count": 3},
            "memory": {"enabled": enabled, "reports": reports},
        }
    )
    r = run(cond, 5)
    starts = [
        {w["worker"]: w["scratch_chars"] for w in e["workers"]} for e in r.of("subrun_started")
    ]
    assert starts[0] == {"W1": 0, "W2": 0, "W3": 0}
    kinds = {e["entry"] for e in r.of("scratch_written")}
    if not enabled and not reports:
        assert all(v == 0 for s in starts for v in s.values())
        assert not kinds
    elif not enabled:
        assert kinds == {"report"}
        assert all(starts[1][w] > 0 for w in starts[1])
        assert r.arena.workers["W1"].scratch.of_kind("report")
        assert {e.kind for e in r.arena.workers["W1"].scratch.entries} == {"report"}
    else:
        assert kinds and ("report" in kinds) == reports
        assert all(starts[2][w] >= starts[1][w] for w in starts[2])
    check_invariants(r, cond)


# --- whose entry: a worker's scratch is shared by its negotiator and its solver -----------------
def test_render_tags_each_entry_with_whose_it_is() -> None:
    """F-16: `[report s1]` did not say whether the negotiator or its solver wrote it. A persona's
    `note` and a solver's `memory` note share their kind, so the writer is kept on the entry."""
    s = Scratch(1000)
    s.write("report", 1, "negotiator report")
    s.write("summary", 1, "history")
    s.write("note", 1, "COALITION W1,W2 RIVAL -")
    s.write("solver_report", 1, "solver report", by="solver")
    s.write("note", 2, "build with make", by="solver")
    assert [e.by for e in s.entries] == ["negotiator"] * 3 + ["solver"] * 2
    assert s.render().splitlines() == [
        "[negotiator's report, subrun 1] negotiator report",
        "[negotiator's condensed history, subrun 1] history",
        "[negotiator's note, subrun 1] COALITION W1,W2 RIVAL -",
        "[solver's report, subrun 1] solver report",
        "[solver's note, subrun 2] build with make",
    ]


def test_the_solvers_memory_tool_writes_the_solvers_note() -> None:
    from mbb.tasks.harness import SolverTools

    s = Scratch(1000)
    tools = SolverTools("W1", None, scratch=s, subrun=3)  # type: ignore[arg-type]  # memory only
    assert tools.memory("remember this").ok
    assert [(e.kind, e.subrun, e.by) for e in s.entries] == [("note", 3, "solver")]
    assert s.render() == "[solver's note, subrun 3] remember this"


class _ReportingSolver(FixedSolver):
    """A solver that writes an after-action report, as the LLM solver does."""

    async def end_subrun(self, recap, scratch) -> None:
        if scratch is not None:
            scratch.write("solver_report", recap.subrun, f"{self.worker} solver", by="solver")


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("reports", [True, False])
def test_the_solvers_report_is_a_report_for_both_switches(monkeypatch, enabled, reports) -> None:
    """The solver's report carries over exactly when the negotiator's does (reports on,
    whatever memory is), and its events validate as `solver_report`."""
    from mbb.core.events import parse_events

    seen: list[list[tuple[str, str]]] = []

    class Reader(PlainNegotiator):
        async def start_subrun(self, subrun, scratch) -> None:
            seen.append([(e.kind, e.by) for e in scratch.entries] if scratch else [])

        async def end_subrun(self, recap, scratch) -> None:
            if scratch is not None:
                scratch.write("report", recap.subrun, "negotiator")

    install_backends(
        monkeypatch,
        negotiators={"W1": Reader, "W2": PlainNegotiator},
        solvers={w: (lambda x: _ReportingSolver(x, need=30, request=30)) for w in ("W1", "W2")},
    )
    cond = condition(
        {"workers": {"count": 2}, "subruns": 2, "memory": {"enabled": enabled, "reports": reports}}
    )
    r = run(cond)
    parse_events(r.lines)
    written = {(e["worker"], e["entry"]) for e in r.of("scratch_written")}
    if reports:
        assert ("W1", "solver_report") in written and ("W2", "solver_report") in written
        assert seen[1] == [("solver_report", "solver"), ("report", "negotiator")]
    else:
        assert not written and seen[1] == []
    check_invariants(r, cond)
