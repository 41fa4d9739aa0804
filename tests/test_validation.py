"""Invalid agent actions: recorded as `invalid_action` events, repaired by the stated rule, and
the run goes on (the README's protocol; the rule table in scheduling/validation.py)."""

from __future__ import annotations

import pytest
from helpers import FixedSolver, PlainNegotiator, check_invariants, condition, install_backends, run

from mbb.core.actions import Ballot, ConversationTurn, Declaration, Message
from mbb.protocol.scheduling.validation import (
    default_ballot,
    repair_ballot,
    repair_declaration,
    repair_message,
)

# --- the repair functions, case by case ---------------------------------------------------------
DECL_BOUNDS = {"budget": 100, "min_s": 30, "max_s": 300, "n_candidates": 4, "note_max": 5}


@pytest.mark.parametrize(
    ("given", "expected", "issues"),
    [
        ({"bid": 500}, {"bid": 100}, [("bid", 500, "clamp")]),
        ({"bid": -5}, {"bid": 0}, [("bid", -5, "clamp")]),
        ({"duration": -3}, {"duration": 30}, [("duration", -3, "clamp")]),
        ({"duration": 10**6}, {"duration": 300}, [("duration", 10**6, "clamp")]),
        ({"position": 0}, {"position": 1}, [("position", 0, "clamp")]),
        ({"position": 9}, {"position": 4}, [("position", 9, "clamp")]),
        ({"note": "toolong"}, {"note": "toolo"}, [("note", 7, "truncate")]),
        ({"bid": 100, "duration": 30, "position": 4}, {}, []),  # the bounds themselves are fine
        (
            {"bid": 101, "duration": 29, "position": 5},
            {"bid": 100, "duration": 30, "position": 4},
            [("bid", 101, "clamp"), ("duration", 29, "clamp"), ("position", 5, "clamp")],
        ),
    ],
)
def test_repair_declaration(given, expected, issues) -> None:
    d = Declaration(**{"bid": 10, "duration": 60, "position": 2, **given})
    fixed, found = repair_declaration(d, **DECL_BOUNDS)
    want = {"bid": 10, "duration": 60, "position": 2, **given, **expected}
    assert (fixed.bid, fixed.duration, fixed.position) == (
        want["bid"],
        want["duration"],
        want["position"],
    )
    assert fixed.note == want.get("note", "")
    assert [(i.field, i.value, i.rule) for i in found] == issues


@pytest.mark.parametrize(
    ("to", "rule", "kept"),
    [("W9", "drop", False), ("W1", "drop", False), ("W2", None, True), (None, None, True)],
    ids=["unknown-peer", "self", "peer", "public"],
)
def test_repair_message_recipient(to, rule, kept) -> None:
    fixed, issues = repair_message(
        Message(to=to, text="hello"), sender="W1", population=["W1", "W2"], max_chars=100
    )
    assert (fixed is not None) == kept
    assert [i.rule for i in issues] == ([rule] if rule else [])
    if rule:
        assert issues[0].field == "to" and issues[0].value == to


def test_repair_message_truncates_long_text() -> None:
    fixed, issues = repair_message(
        Message(text="x" * 12), sender="W1", population=["W1"], max_chars=5
    )
    assert fixed is not None and fixed.text == "xxxxx"
    assert [(i.field, i.value, i.rule) for i in issues] == [("text", 12, "truncate")]


TB = ["A", "B", "C"]  # tie-break order
DECLARED = {"A": 60, "B": 40, "C": 90}


@pytest.mark.parametrize(
    ("ranking", "allocations", "want_ranking", "want_alloc", "issues"),
    [
        (("C", "B", "A"), {}, ["C", "B", "A"], [90, 40, 60], []),
        (("C",), {}, ["C", "A", "B"], [90, 60, 40], [("ranking", ["A", "B"], "append")]),
        (("B", "B", "C", "A"), {}, ["B", "C", "A"], [40, 90, 60], [("ranking", "B", "drop")]),
        (("Z", "C", "B", "A"), {}, ["C", "B", "A"], [90, 40, 60], [("ranking", "Z", "drop")]),
        (
            ("A", "B", "C"),
            {"A": 999, "B": -1, "C": 5},
            ["A", "B", "C"],
            [60, 0, 5],
            [("allocations", {"A": 999}, "clamp"), ("allocations", {"B": -1}, "clamp")],
        ),
        (
            ("A", "B", "C"),
            {"A": 10},
            ["A", "B", "C"],
            [10, 40, 90],
            [("allocations", "B", "default"), ("allocations", "C", "default")],
        ),
        (
            ("A", "B", "C"),
            {"A": 1, "B": 2, "C": 3, "Q": 4},
            ["A", "B", "C"],
            [1, 2, 3],
            [("allocations", ["Q"], "drop")],
        ),
    ],
    ids=["valid", "missing", "repeated", "unknown", "over-declared", "partial", "non-candidate"],
)
def test_repair_ballot(ranking, allocations, want_ranking, want_alloc, issues) -> None:
    b = Ballot(ranking=ranking, allocations=allocations)
    fixed, found = repair_ballot(b, tiebreak=TB, declared=DECLARED, reasoning_max=100)
    assert list(fixed.ranking) == want_ranking
    assert [fixed.allocations[c] for c in fixed.ranking] == want_alloc
    assert [(i.field, i.value, i.rule) for i in found] == issues


def test_default_ballot_is_tie_break_order_with_declared_time() -> None:
    b = default_ballot(TB, DECLARED)
    assert list(b.ranking) == TB and b.allocations == DECLARED


# --- inside the arena: a negotiator that misbehaves in every way ---------------------------------
class Boom(RuntimeError):
    pass


def _raise(*_a):
    raise Boom("backend exploded")


def _misbehaving_backends(monkeypatch, concurrent: bool) -> None:
    revision = Declaration(bid=10**6, duration=45, position=1)
    negotiators = {
        "W1": lambda w: PlainNegotiator(
            w,
            declare=lambda v: Declaration(bid=10**6, duration=10**6, position=99),
            converse=lambda v: ConversationTurn(
                messages=(
                    Message(to="W99", text="to nobody"),
                    Message(to="W1", text="to myself"),
                    Message(text="hello all"),
                ),
            ),
            vote=lambda v: Ballot(ranking=("W2",), allocations={"W2": 10**6}),
        ),
        "W2": lambda w: PlainNegotiator(
            w,
            declare=lambda v: Declaration(bid=-5, duration=-3, position=0),
            converse=_raise,
            vote=lambda v: Ballot(ranking=("W1", "W1", "W2", "W3", "W4")),
        ),
        "W3": lambda w: PlainNegotiator(
            w,
            declare=_raise,
            converse=lambda v: ConversationTurn(revision=revision),
            vote=lambda v: Ballot(ranking=("ZZ", "W4", "W3", "W2", "W1")),
        ),
        "W4": lambda w: PlainNegotiator(w, vote=_raise, end=_raise),
    }
    solvers = {w: (lambda x: FixedSolver(x, need=50, request=60)) for w in negotiators}

    def concurrently(make):
        def factory(w):
            n = make(w)
            n.concurrent = concurrent  # gathered within a phase (as LLM backends are)
            return n

        return factory

    negotiators = {w: concurrently(make) for w, make in negotiators.items()}
    install_backends(monkeypatch, negotiators=negotiators, solvers=solvers)


def _first_round(r, kind):
    return {
        e["worker"]: e
        for e in r.of(kind)
        if (e["subrun"], e["round"]) == (1, 1) and not e.get("revision")
    }


@pytest.mark.parametrize("concurrent", [False, True], ids=["awaited", "gathered"])
@pytest.mark.parametrize("bids", ["fixed", "revisable"])
def test_every_invalid_action_is_recorded_repaired_and_the_run_continues(
    monkeypatch, bids, concurrent
):
    _misbehaving_backends(monkeypatch, concurrent)
    cond = condition(
        {
            "workers": {"count": 4},
            "subruns": 2,
            "budget": {"credits": 100},
            "negotiation": {"bids": bids, "max_turns": 2},
            "mechanism": {"aggregation": "price_only"},
        }
    )
    r = run(cond)
    inv = [e for e in r.of("invalid_action") if e["subrun"] == 1 and e["round"] in (1, None)]
    got = {(e["worker"], e["phase"], e["field"], e["rule"], repr(e["value"])) for e in inv}
    expected = {
        ("W1", "declaration", "bid", "clamp", repr(10**6)),
        ("W1", "declaration", "duration", "clamp", repr(10**6)),
        ("W1", "declaration", "position", "clamp", "99"),
        ("W2", "declaration", "bid", "clamp", "-5"),
        ("W2", "declaration", "duration", "clamp", "-3"),
        ("W2", "declaration", "position", "clamp", "0"),
        (
            "W3",
            "declaration",
            "(backend)",
            "default declaration: bid 0, requested duration, last position",
            "'Boom'",
        ),
        ("W1", "conversation", "to", "drop", "'W99'"),
        ("W1", "conversation", "to", "drop", "'W1'"),
        ("W2", "conversation", "(backend)", "pass this turn", "'Boom'"),
        ("W1", "ballot", "ranking", "append", repr(["W1", "W3", "W4"])),
        ("W1", "ballot", "allocations", "clamp", repr({"W2": 10**6})),
        ("W2", "ballot", "ranking", "drop", "'W1'"),
        ("W3", "ballot", "ranking", "drop", "'ZZ'"),
        ("W4", "ballot", "(backend)", "default ballot: bid order, declared time", "'Boom'"),
        ("W4", "report", "(backend)", "no after-action report", "'Boom'"),
    }
    if bids == "fixed":
        expected.add(("W3", "conversation", "revision", "drop", repr(10**6)))
    else:  # a revision is repaired like a declaration
        expected.add(("W3", "revision", "bid", "clamp", repr(10**6)))
    missing = expected - got
    assert not missing, f"not recorded: {sorted(missing)}"
    for e in inv:
        assert e["detail"], "an invalid action without an explanation"

    # the repaired values are what the declared / ballot events (and the schedule) carry
    decl = _first_round(r, "declared")
    assert {w: (d["bid"], d["duration"], d["position"]) for w, d in decl.items()} == {
        "W1": (100, 300, 4),
        "W2": (0, 30, 1),
        "W3": (0, 60, 4),
        "W4": (0, 60, 1),
    }
    revised = [e for e in r.of("declared") if e["revision"] and (e["subrun"], e["round"]) == (1, 1)]
    if bids == "fixed":
        assert not revised
    else:
        assert [(e["worker"], e["bid"], e["turn"]) for e in revised][:1] == [("W3", 100, 1)]
    ballots = _first_round(r, "ballot")
    assert ballots["W1"]["ranking"] == ["W2", "W1", "W3", "W4"]
    assert ballots["W1"]["allocations"][0] == 30  # clamped to W2's declared duration
    assert ballots["W2"]["ranking"] == ["W1", "W2", "W3", "W4"]
    assert ballots["W3"]["ranking"] == ["W4", "W3", "W2", "W1"]
    # the default ballot is the tie-break order (bid, then queue); W3's revision raised its bid
    tiebreak = ["W1", "W2", "W3", "W4"] if bids == "fixed" else ["W1", "W3", "W2", "W4"]
    assert ballots["W4"]["defaulted"] and ballots["W4"]["ranking"] == tiebreak
    assert not any(b["defaulted"] for w, b in ballots.items() if w != "W4")
    assert [
        m["text"] for m in r.of("message") if (m["subrun"], m["round"], m["turn"]) == (1, 1, 1)
    ] == ["hello all"]
    assert len(r.of("subrun_started")) == 2
    check_invariants(r, cond)


class FlakySolver(FixedSolver):
    """Raises in one place (run_window / evaluate / the second next_action)."""

    def __init__(self, worker, where):
        super().__init__(worker, need=100, request=60)
        self.where, self.calls = where, 0

    async def next_action(self, view):
        self.calls += 1
        if self.where == "request" and self.calls == 2:
            raise Boom("request failed")
        return await super().next_action(view)

    async def run_window(self, grant):
        if self.where == "execution":
            raise Boom("window failed")
        return await super().run_window(grant)

    async def evaluate(self):
        if self.where == "evaluation":
            raise Boom("evaluation failed")
        return await super().evaluate()


@pytest.mark.parametrize(
    ("where", "rule"),
    [
        ("request", "no request this time"),
        ("execution", "window forfeited at its start"),
        ("evaluation", "score 0"),
    ],
)
def test_solver_failures_are_recorded_and_the_run_continues(monkeypatch, where, rule) -> None:
    install_backends(
        monkeypatch,
        negotiators={"W1": PlainNegotiator, "W2": PlainNegotiator},
        solvers={
            "W1": lambda w: FlakySolver(w, where),
            "W2": lambda w: FixedSolver(w, need=50, request=60),
        },
    )
    cond = condition({"workers": {"count": 2}, "subruns": 1, "deadline": {"minutes": 5}})
    r = run(cond)
    inv = [e for e in r.of("invalid_action") if e["worker"] == "W1"]
    assert inv and {(e["phase"], e["field"], e["rule"], e["value"]) for e in inv} == {
        (where, "(backend)", rule, "Boom")
    }
    assert r.of("evaluation")[-1]["worker"] == "W2"  # the other worker still ran and was scored
    check_invariants(r, cond)
