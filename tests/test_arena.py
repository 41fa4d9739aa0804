"""The arena follows the README's protocol: payment, hand-over, deadlines, time, determinism.

Conditions are small (few workers, short deadlines) so each run takes milliseconds. Where the
scripted population cannot force a situation, tiny test backends from `helpers` are swapped in
for the "scripted"/"modeled" registry entries with monkeypatch (restored after each test).
"""

from __future__ import annotations

import itertools
import json

import pytest
from helpers import (
    NEGOTIATION_KINDS,
    FixedSolver,
    PlainNegotiator,
    by_subrun,
    check_invariants,
    condition,
    deadlines,
    install_backends,
    rounds_of,
    run,
)

from mbb.batch.build import run_condition
from mbb.core.actions import Ballot, Declaration
from mbb.core.eventlog import read_lines

SHORT = {"name": "short", "deadline": {"minutes": 6}, "subruns": 2}
SEEDS = range(6)


def _windows_in_order(round_events):
    return [e for e in round_events if e["kind"] in ("window_started", "window_ended")]


# --- 1. payment at window start, and only then ----------------------------------------------
@pytest.mark.parametrize("rule", ["pay_your_bid", "next_price", "none"])
def test_payment_happens_at_window_start_and_only_then(rule: str) -> None:
    """Each payment is immediately followed by its holder's window_started at the same t with
    price == amount; every priced window was paid for; the price follows the payment rule from
    the published schedule (pay_your_bid: own bid; next_price: min(own bid, the next bid down the
    schedule, 0 for the last); none: 0); a dropped window costs nothing."""
    seen = {"payments": 0, "dropped": 0}
    for seed in SEEDS:
        cond = condition(SHORT, mechanism={"payment": rule})
        r = run(cond, seed)
        for rnd in rounds_of(r.events).values():
            sched = next(e for e in rnd if e["kind"] == "schedule_published")
            order, bids = sched["order"], sched["bids"]
            expected = {
                "pay_your_bid": dict(zip(order, bids, strict=True)),
                "next_price": {
                    x: min(bids[i], bids[i + 1] if i + 1 < len(order) else 0)
                    for i, x in enumerate(order)
                },
                "none": dict.fromkeys(order, 0),
            }[rule]
            for i, e in enumerate(rnd):
                if e["kind"] == "payment":
                    seen["payments"] += 1
                    nxt = rnd[i + 1]
                    assert nxt["kind"] == "window_started"
                    assert (nxt["worker"], nxt["t"], nxt["price"]) == (
                        e["worker"],
                        e["t"],
                        e["amount"],
                    )
                    assert e["rule"] == rule
                if e["kind"] == "window_started":
                    assert e["price"] == expected[e["worker"]]
                    paid = rnd[i - 1]["kind"] == "payment" and rnd[i - 1]["worker"] == e["worker"]
                    assert paid == (e["price"] > 0)
            payers = [e["worker"] for e in rnd if e["kind"] == "payment"]
            assert len(payers) == len(set(payers)), "a worker paid twice in one round"
            for d in (e for e in rnd if e["kind"] == "window_dropped"):
                seen["dropped"] += 1
                assert d["worker"] not in payers, "a dropped window was paid for"
        check_invariants(r, cond)
    assert seen["dropped"] > 0, "the condition never dropped a window: the test shows nothing"
    if rule == "none":
        assert seen["payments"] == 0
    else:
        assert seen["payments"] > 0


def test_worker_terminated_while_waiting_pays_nothing(monkeypatch) -> None:
    """W2 (high bid) runs first for 120 s; W1's 1-minute deadline passes while it waits, so its
    window is dropped and it pays nothing, though it bid."""
    install_backends(
        monkeypatch,
        negotiators={
            "W1": lambda w: PlainNegotiator(w, bid=40),
            "W2": lambda w: PlainNegotiator(w, bid=90),
        },
        solvers={
            "W1": lambda w: FixedSolver(w, need=100, request=100),
            "W2": lambda w: FixedSolver(w, need=120, request=120),
        },
    )
    cond = condition(
        {"workers": {"count": 2, "overrides": {"W1": {"deadline_min": 1}}}, "subruns": 1},
        mechanism={"aggregation": "price_only"},
    )
    r = run(cond)
    kinds = [
        (e["kind"], e["worker"])
        for e in r.events
        if e["kind"]
        in ("payment", "window_started", "window_ended", "window_dropped", "terminated")
    ]
    assert kinds == [
        ("payment", "W2"),
        ("window_started", "W2"),
        ("terminated", "W1"),
        ("window_ended", "W2"),
        ("window_dropped", "W1"),
    ]
    assert [e["amount"] for e in r.of("payment")] == [90]
    assert r.arena.ledger.balances == {"W1": 1000, "W2": 910}
    check_invariants(r, cond)


# --- 2. early release hands over at once ----------------------------------------------------------
def _check_back_to_back(events) -> int:
    """Consecutive windows of a round are back to back; returns how many early ends were seen.

    Reading: "at once" means the next window_started carries exactly the clock value of the
    previous window_ended (compared with ==); start + used from the event reproduces it up to
    float rounding of the sum (1e-9 s), since `used` is recorded unrounded.
    """
    early = 0
    for rnd in rounds_of(events).values():
        ws = _windows_in_order(rnd)
        for a, b in itertools.pairwise(ws):
            if a["kind"] == "window_started":
                assert b["kind"] == "window_ended" and b["worker"] == a["worker"]
                assert b["start"] == a["t"]
                assert b["t"] == pytest.approx(a["t"] + b["used"], abs=1e-9)
            else:  # a window ended; the next one starts where it stopped
                assert b["t"] == pytest.approx(a["start"] + a["used"], abs=1e-9)
                assert b["t"] == a["t"], "idle gap (or overlap) between two windows"
                if a["reason"] in ("completed", "released") and a["used"] < a["allocation"]:
                    early += 1
    return early


def test_early_completion_hands_the_resource_over_at_once() -> None:
    early = 0
    for seed in SEEDS:
        r = run(condition({"subruns": 2, "workers": {"count": 4}}), seed)
        early += _check_back_to_back(r.events)
    assert early > 0, "no early completion happened: the test shows nothing"


def test_early_release_hands_the_resource_over_at_once(monkeypatch) -> None:
    """A solver that releases after 10 s of a 60 s window: the next window starts 10 s later."""
    install_backends(
        monkeypatch,
        negotiators={w: PlainNegotiator for w in ("W1", "W2", "W3")},
        solvers={
            w: (lambda x: FixedSolver(x, need=45, request=60, release_after=10))
            for w in ("W1", "W2", "W3")
        },
    )
    cond = condition({"workers": {"count": 3}, "subruns": 1})
    r = run(cond)
    ended = r.of("window_ended")
    assert {e["reason"] for e in ended} == {"released", "completed"}
    assert all(e["used"] in (5, 10) for e in ended)
    starts = [e["t"] for e in r.of("window_started")]
    assert starts == [10.0 * i for i in range(len(starts) - 3)] + [
        starts[-3],
        starts[-3] + 5,
        starts[-3] + 10,
    ]
    # every window ended early; all but the last of each round handed over to a next one
    assert _check_back_to_back(r.events) == len(ended) - len(r.of("round_started"))
    check_invariants(r, cond)


# --- 3. deadlines: termination, dropped windows ---------------------------------------------------
def test_terminated_worker_pays_nothing_for_its_later_windows_and_ends_at_its_deadline() -> None:
    """terminated.t == deadline_s; later windows of that worker are dropped (reason terminated)
    without payment; no window starts at/after its holder's deadline or ends after it."""
    terminated = dropped = 0
    for seed in SEEDS:
        cond = condition(SHORT)
        r = run(cond, seed)
        dl = deadlines(r.events)
        for sub, evs in by_subrun(r.events).items():
            gone: set[str] = set()
            for e in evs:
                w = e["worker"]
                if e["kind"] == "terminated":
                    terminated += 1
                    assert e["t"] == e["deadline_s"] == dl[(sub, w)]
                    gone.add(w)
                elif w in gone:
                    assert e["kind"] in ("window_dropped", "evaluation", "scratch_written")
                    if e["kind"] == "window_dropped":
                        dropped += 1
                        assert e["reason"] == "terminated"
                if e["kind"] == "window_started":
                    assert e["t"] < dl[(sub, w)]
                if e["kind"] == "window_ended":
                    assert e["t"] <= dl[(sub, w)]
                    assert (e["reason"] == "deadline") == (e["t"] == dl[(sub, w)])
            outcomes = {e["worker"]: e["outcome"] for e in evs if e["kind"] == "evaluation"}
            assert {w for w, o in outcomes.items() if o == "terminated"} == gone
        check_invariants(r, cond)
    assert terminated > 0 and dropped > 0


def test_allocation_ending_exactly_at_the_deadline_terminates_the_holder(monkeypatch) -> None:
    """Regression: a 60 s window from t=0 for a worker with a 1-minute deadline used to end with
    reason 'allocation'; the worker then re-requested and negotiated at its deadline."""
    install_backends(
        monkeypatch,
        negotiators={"W1": PlainNegotiator},
        solvers={"W1": lambda w: FixedSolver(w, need=500, request=60)},
    )
    cond = condition({"workers": {"count": 1}, "subruns": 1, "deadline": {"minutes": 1}})
    r = run(cond)
    kinds = [e["kind"] for e in r.events if e["subrun"] == 1]
    assert kinds[-5:] == [
        "window_ended",
        "terminated",
        "ballots_published",  # after the round's windows ran
        "subrun_ended",
        "evaluation",
    ]
    assert r.of("window_ended")[0]["reason"] == "deadline"
    assert len(r.of("round_started")) == 1 and len(r.of("requested")) == 1
    check_invariants(r, cond)


# --- 4. negotiation takes no time; waiting does ---------------------------------------------------
def test_negotiation_events_carry_the_round_start_time() -> None:
    rounds = 0
    for seed in SEEDS:
        r = run(condition(SHORT, negotiation={"max_turns": 3}), seed)
        for rnd in rounds_of(r.events).values():
            rounds += 1
            t0 = rnd[0]["t"]
            assert rnd[0]["kind"] == "round_started"
            neg = [e for e in rnd if e["kind"] in NEGOTIATION_KINDS]
            assert {e["t"] for e in neg} == {t0}
            # ... and the first window starts then too
            first = next((e for e in rnd if e["kind"] == "window_started"), None)
            if first is not None:
                assert first["t"] == t0
        assert r.of("message"), "no conversation happened"
    assert rounds > 0


def test_deadline_passes_while_waiting_in_the_queue(monkeypatch) -> None:
    """W1 negotiates for many turns at t=0 and loses its 1-minute deadline only while waiting
    behind W2's 90 s window, not during the talk."""
    from mbb.core.actions import ConversationTurn, Message

    def chatty(v):
        return ConversationTurn(messages=(Message(text=f"turn {v.turn}"),))

    install_backends(
        monkeypatch,
        negotiators={
            "W1": lambda w: PlainNegotiator(w, bid=1, converse=chatty),
            "W2": lambda w: PlainNegotiator(w, bid=5, converse=chatty),
        },
        solvers={
            "W1": lambda w: FixedSolver(w, need=30, request=30),
            "W2": lambda w: FixedSolver(w, need=90, request=90),
        },
    )
    cond = condition(
        {
            "workers": {"count": 2, "overrides": {"W1": {"deadline_min": 1}}},
            "subruns": 1,
            "negotiation": {"max_turns": 50},
        },
        mechanism={"aggregation": "price_only"},
    )
    r = run(cond)
    assert len(r.of("message")) == 100
    assert {e["t"] for e in r.of("message")} == {0.0}
    term = r.of("terminated")
    assert [(e["worker"], e["t"]) for e in term] == [("W1", 60.0)]
    # W1 never held the resource: it was waiting when terminated
    assert not [e for e in r.of("window_started") if e["worker"] == "W1"]
    w2_start, w2_end = r.of("window_started")[0], r.of("window_ended")[0]
    assert w2_start["worker"] == "W2" and w2_start["t"] < 60.0 < w2_end["t"]
    check_invariants(r, cond)


# --- 7. determinism -------------------------------------------------------------------------------
def _without_wall(lines: list[str]) -> list[str]:
    out = []
    for ln in lines:
        d = json.loads(ln)
        d.pop("wall")
        out.append(json.dumps(d, sort_keys=True))
    return out


def test_same_seed_gives_identical_events_and_different_seeds_differ(tmp_path) -> None:
    cond = condition(SHORT, workers={"count": 4})
    a = run_condition(cond, 3, tmp_path / "a")
    b = run_condition(cond, 3, tmp_path / "b")
    c = run_condition(cond, 4, tmp_path / "c")
    la = read_lines(tmp_path / "a" / a.run_id / "events.jsonl")
    lb = read_lines(tmp_path / "b" / b.run_id / "events.jsonl")
    lc = read_lines(tmp_path / "c" / c.run_id / "events.jsonl")
    assert la == a.log.lines and len(la) > 50
    assert _without_wall(la) == _without_wall(lb)
    # byte-identical once the wall clock is cut out of each line (it is the last field)
    assert [ln[: ln.rindex(',"wall":')] for ln in la] == [ln[: ln.rindex(',"wall":')] for ln in lb]
    # a different seed changes the payloads, not just the run id
    strip = [json.loads(x) for x in _without_wall(la)], [json.loads(x) for x in _without_wall(lc)]
    for d in (*strip[0], *strip[1]):
        d.pop("run_id")
        d.pop("seed", None)
    assert strip[0] != strip[1]


def test_run_condition_writes_the_events_it_returns(tmp_path) -> None:
    res = run_condition(condition(SHORT), 1, tmp_path)
    assert res.out_dir == tmp_path / "short-seed0001"
    assert read_lines(res.out_dir / "events.jsonl") == res.log.lines


# --- 12. budget reset per subrun ------------------------------------------------------------------
@pytest.mark.parametrize("reset", [True, False])
def test_budget_reset_each_subrun_restores_budgets(reset: bool) -> None:
    cond = condition(
        {
            "subruns": 3,
            "budget": {"credits": 300, "reset_each_subrun": reset},
            "workers": {"count": 3, "overrides": {"W2": {"budget": 700}}},
        }
    )
    r = run(cond, 2)
    starts = {
        e["subrun"]: {w["worker"]: w["budget"] for w in e["workers"]}
        for e in r.of("subrun_started")
    }
    spent: dict[tuple[int, str], int] = {}
    for p in r.of("payment"):
        spent[(p["subrun"], p["worker"])] = spent.get((p["subrun"], p["worker"]), 0) + p["amount"]
    assert any(spent.get((s, w)) for s in (1, 2) for w in ("W1", "W2", "W3")), "nobody paid"
    full = {"W1": 300, "W2": 700, "W3": 300}
    assert starts[1] == full
    for s in (2, 3):
        if reset:
            assert starts[s] == full
        else:
            assert starts[s] == {w: starts[s - 1][w] - spent.get((s - 1, w), 0) for w in full}
    check_invariants(r, cond)


def test_unknown_backend_is_a_clear_error(monkeypatch) -> None:
    from mbb.agents.backends import SOLVERS

    # a copy without it (delitem would put it back last, changing the registry's order)
    without = {k: v for k, v in SOLVERS._entries.items() if k != "modeled"}
    monkeypatch.setattr(SOLVERS, "_entries", without)
    with pytest.raises(ValueError, match="unknown solver backend 'modeled'; valid: oracle, llm"):
        run(condition({"workers": {"count": 1}}))


def test_declaration_with_explicit_fields_is_recorded_verbatim(monkeypatch) -> None:
    """A valid declaration and ballot pass through unchanged (no invalid_action)."""
    install_backends(
        monkeypatch,
        negotiators={
            "W1": lambda w: PlainNegotiator(
                w,
                declare=lambda v: Declaration(bid=7, duration=45, position=2, note="hi"),
                vote=lambda v: Ballot(
                    ranking=tuple(reversed(v.candidates)), allocations={c: 40 for c in v.candidates}
                ),
            ),
            "W2": PlainNegotiator,
        },
        solvers={
            "W1": lambda w: FixedSolver(w, need=40, request=45),
            "W2": lambda w: FixedSolver(w, need=40, request=45),
        },
    )
    cond = condition({"workers": {"count": 2}, "subruns": 1})
    r = run(cond)
    d1 = next(e for e in r.of("declared") if e["worker"] == "W1")
    assert (d1["bid"], d1["duration"], d1["position"], d1["note"]) == (7, 45, 2, "hi")
    b1 = next(e for e in r.of("ballot") if e["worker"] == "W1")
    assert b1["ranking"] == ["W2", "W1"] and b1["allocations"] == [40, 40]
    assert not r.of("invalid_action")
    check_invariants(r, cond)


# --- the subrun's end conditions and other stated rules ---------------------------------------
class IdleSolver(FixedSolver):
    """Never asks for a window (nor withdraws)."""

    async def next_action(self, view):
        return None


def test_idle_worker_is_withdrawn_when_the_resource_idles(monkeypatch) -> None:
    """Stated rule: with the resource idle and nobody requesting, idle workers are withdrawn and
    the subrun ends 'stalled'."""
    install_backends(
        monkeypatch,
        negotiators={"W1": PlainNegotiator, "W2": PlainNegotiator},
        solvers={
            "W1": lambda w: IdleSolver(w, need=10, request=30),
            "W2": lambda w: FixedSolver(w, need=50, request=60),
        },
    )
    cond = condition({"workers": {"count": 2}, "subruns": 1})
    r = run(cond)
    assert [(e["worker"], e["reason"].split(":")[0]) for e in r.of("withdrawn")] == [("W1", "idle")]
    assert r.of("subrun_ended")[0]["reason"] == "stalled"
    assert {e["worker"]: e["outcome"] for e in r.of("evaluation")} == {
        "W1": "withdrawn",
        "W2": "completed",
    }
    check_invariants(r, cond)


def test_max_rounds_stops_a_subrun_with_unfinished_workers() -> None:
    cond = condition({"workers": {"count": 2}, "subruns": 2, "time": {"max_rounds_per_subrun": 1}})
    r = run(cond)
    assert [e["reason"] for e in r.of("subrun_ended")] == ["max_rounds", "max_rounds"]
    assert [e["rounds"] for e in r.of("subrun_ended")] == [1, 1]
    assert {e["outcome"] for e in r.of("evaluation")} == {"unfinished"}
    check_invariants(r, cond)


def test_zero_allocation_drops_the_window_and_the_worker_asks_again(monkeypatch) -> None:
    """Ballots giving W1 no time (median 0): its window is dropped (reason zero_allocation),
    it pays nothing for it and is back in the queue for the next round."""

    def starve_w1(v):
        alloc = {
            c: 0 if (c == "W1" and v.round == 1) else v.declarations[c].duration
            for c in v.candidates
        }
        return Ballot(ranking=tuple(v.candidates), allocations=alloc)

    neg = {w: (lambda x: PlainNegotiator(x, bid=10, vote=starve_w1)) for w in ("W1", "W2")}
    sol = {w: (lambda x: FixedSolver(x, need=40, request=60)) for w in ("W1", "W2")}
    install_backends(monkeypatch, negotiators=neg, solvers=sol)
    cond = condition({"workers": {"count": 2}, "subruns": 1})
    r = run(cond)
    dropped = r.of("window_dropped")
    assert [(e["worker"], e["reason"], e["round"]) for e in dropped] == [
        ("W1", "zero_allocation", 1)
    ]
    assert [(e["worker"], e["round"]) for e in r.of("payment")] == [("W2", 1), ("W1", 2)]
    assert r.of("round_started")[1]["candidates"] == ["W1"]
    check_invariants(r, cond)
