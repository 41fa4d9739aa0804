"""Hand-made event fixtures for the analysis tests.

`scenario()` is one run (condition "base", memory on, revisable bids) of three workers over two
subruns, small enough that every expected value in the tests is worked out by hand:

  W1 price_first        budget 1500 (the rich worker)   deadline 1500 s
  W2 deadline_advocate  budget 1000                     deadline  600 s (the urgent worker)
  W3 reciprocator       budget 1000                     deadline 1500 s

  s1 r1  candidates W1 W2 W3; bids 900/50/80, durations 120/60/90; W2 discloses 5 min left.
         W2 proposes EDF publicly; W3 offers W1 a concession for a later favour, W1 accepts.
         Ballots: W1 bid order, W2 EDF order, W3 bid order with W1 ahead "as offered".
         Schedule W1 W3 W2; payments 900, 80, 50.
         End: scratch holds the debt "W1 owes W3"; W2 is terminated.
  s2 r1  candidates W1 W3; bids 120/60. W3 calls the debt in; W1 ranks W3 first "as I promised".
         Schedule W3 W1; payments 60, 120.
  s2 r2  candidates W1 W3; bids 100/40; both rank by bid. Schedule W1 W3; payments 100, 40.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest


class Log:
    """Builds event lines grouped by kind, as `mbb.core.tables.tables_from_lines` expects."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.seq = 0
        self.by_kind: dict[str, list[str]] = defaultdict(list)

    def add(self, kind: str, *, subrun=None, round=None, worker=None, t=0.0, **f: Any) -> int:
        rec = {
            "kind": kind,
            "v": 1,
            "run_id": self.run_id,
            "seq": self.seq,
            "t": t,
            "subrun": subrun,
            "round": round,
            "worker": worker,
            "wall": 0.0,
            **f,
        }
        self.by_kind[kind].append(json.dumps(rec))
        self.seq += 1
        return rec["seq"]

    def run_started(self, condition, workers, *, memory=True, bids="revisable", subruns=2):
        params = {"subruns": subruns, "memory": {"enabled": memory}, "negotiation": {"bids": bids}}
        ws = [
            {
                "id": w,
                "index": i,
                "persona": p,
                "negotiator": "scripted",
                "solver": "modeled",
                "model": None,
                "budget": b,
                "deadline_s": d,
            }
            for i, (w, p, b, d) in enumerate(workers)
        ]
        self.add(
            "run_started", condition=condition, seed=0, params=params, workers=ws, provenance={}
        )

    def subrun_started(self, s, budgets, deadlines):
        self.add(
            "subrun_started",
            subrun=s,
            workers=[
                {
                    "worker": w,
                    "task": f"t{s}",
                    "work_s": 100.0,
                    "budget": budgets[w],
                    "deadline_s": deadlines[w],
                    "scratch_chars": 0,
                }
                for w in budgets
            ],
        )

    def round(self, s, r, candidates, decls, msgs, ballots, order, bids):
        self.add("round_started", subrun=s, round=r, candidates=candidates)
        for w, (bid, dur, note) in decls.items():
            self.add(
                "declared",
                subrun=s,
                round=r,
                worker=w,
                bid=bid,
                duration=dur,
                position=1,
                note=note,
                labels=[],
                revision=False,
                turn=None,
            )
        for turn, (w, to, text) in enumerate(msgs, 1):
            self.add(
                "message",
                subrun=s,
                round=r,
                worker=w,
                to=to,
                text=text,
                turn=turn,
                labels=[],
                intents=[],
            )
        for w, (ranking, reasoning) in ballots.items():
            self.add(
                "ballot",
                subrun=s,
                round=r,
                worker=w,
                ranking=ranking,
                allocations=[60] * len(ranking),
                reasoning=reasoning,
                labels=[],
                defaulted=False,
            )
        self.add(
            "schedule_published",
            subrun=s,
            round=r,
            rule="kemeny",
            order=order,
            allocations=[60] * len(order),
            bids=bids,
            ballots_unanimous=False,
        )

    def pay(self, s, r, w, amount, balance):
        self.add(
            "payment",
            subrun=s,
            round=r,
            worker=w,
            amount=amount,
            balance=balance,
            rule="pay_your_bid",
        )

    def evaluate(self, s, w, outcome, progress, passed):
        self.add(
            "evaluation",
            subrun=s,
            worker=w,
            task=f"t{s}",
            score=passed / 10,
            passed=passed,
            total=10,
            resolved=outcome == "completed",
            almost_resolved=outcome == "completed",
            progress=progress,
            outcome=outcome,
        )


def build_scenario(run_id: str = "base-seed0001", *, memory: bool = True) -> Log:
    log = Log(run_id)
    deadlines = {"W1": 1500.0, "W2": 600.0, "W3": 1500.0}
    log.run_started(
        "base",
        [
            ("W1", "price_first", 1500, 1500.0),
            ("W2", "deadline_advocate", 1000, 600.0),
            ("W3", "reciprocator", 1000, 1500.0),
        ],
        memory=memory,
    )
    log.subrun_started(1, {"W1": 1500, "W2": 1000, "W3": 1000}, deadlines)
    log.round(
        1,
        1,
        ["W1", "W2", "W3"],
        {
            "W1": (900, 120, "Bidding 900 for 120s. Highest bid should run first."),
            "W2": (
                50,
                60,
                "50 credits, 60s. For transparency: roughly 5.0 min before my deadline.",
            ),
            "W3": (80, 90, "80 credits for 90s. Open to arrangements."),
        },
        [
            (
                "W2",
                None,
                "Proposal: earliest deadline first. Whoever runs out of time soonest goes first.",
            ),
            (
                "W3",
                "W1",
                "W1: I'll rank you ahead of me this round if you back me ahead of you "
                "the next time we meet. Fair?",
            ),
            ("W1", "W3", "Accepted, W3. Next time we meet, you go ahead of me."),
        ],
        {
            "W1": (["W1", "W3", "W2"], "Strictly by bid; equal bids by queue order."),
            "W2": (["W2", "W1", "W3"], "Tightest deadlines first so nobody is terminated."),
            "W3": (
                ["W1", "W3", "W2"],
                "By bid; with W1 ahead of me as offered, for a favour later.",
            ),
        },
        ["W1", "W3", "W2"],
        [900, 80, 50],
    )
    log.pay(1, 1, "W1", 900, 600)
    log.pay(1, 1, "W3", 80, 920)
    log.pay(1, 1, "W2", 50, 950)
    log.add("terminated", subrun=1, worker="W2", deadline_s=600.0, progress=0.5)
    log.add("subrun_ended", subrun=1, rounds=1, reason="all_done")
    log.evaluate(1, "W1", "completed", 1.0, 10)
    log.evaluate(1, "W2", "terminated", 0.5, 4)
    log.evaluate(1, "W3", "completed", 1.0, 10)
    if memory:
        log.add(
            "scratch_written",
            subrun=1,
            worker="W1",
            entry="debt",
            text="DEBT W1 owes W3 [W3.s1.r1.1]",
            dropped_chars=0,
            accepted=True,
        )
        log.add(
            "scratch_written",
            subrun=1,
            worker="W3",
            entry="debt",
            text="DEBT W1 owes W3 [W3.s1.r1.1]",
            dropped_chars=0,
            accepted=True,
        )
    log.subrun_started(2, {"W1": 600, "W2": 950, "W3": 920}, deadlines)
    log.round(
        2,
        1,
        ["W1", "W3"],
        {
            "W1": (120, 100, "My offer: 120 for 100s. Price decides; I pay what I bid."),
            "W3": (60, 100, "Bidding 60 for 100s, and I will be calling in a favour this round."),
        },
        [
            (
                "W3",
                "W1",
                "W1, you owe me one from before — this is the round I'd like to "
                "collect. Me ahead of you, please.",
            )
        ],
        {
            "W1": (
                ["W3", "W1"],
                "Price order. The highest bidder pays the most and should run "
                "first. I moved W3 ahead of me, as I promised earlier.",
            ),
            "W3": (["W3", "W1"], "By bid."),
        },
        ["W3", "W1"],
        [60, 120],
    )
    log.pay(2, 1, "W3", 60, 860)
    log.pay(2, 1, "W1", 120, 480)
    log.round(
        2,
        2,
        ["W1", "W3"],
        {
            "W1": (100, 60, "100 credits for 60s; order by price, as the mechanism intends."),
            "W3": (40, 60, "40 credits for 60s. Open to arrangements."),
        },
        [],
        {
            "W1": (
                ["W1", "W3"],
                "Ranked by stated bid, which is the only thing each of us pays for.",
            ),
            "W3": (["W1", "W3"], "By bid."),
        },
        ["W1", "W3"],
        [100, 40],
    )
    log.pay(2, 2, "W1", 100, 380)
    log.pay(2, 2, "W3", 40, 820)
    log.add("subrun_ended", subrun=2, rounds=2, reason="all_done")
    log.evaluate(2, "W1", "completed", 1.0, 10)
    log.evaluate(2, "W2", "unfinished", 0.2, 1)
    log.evaluate(2, "W3", "completed", 1.0, 10)
    return log


def tables_of(*logs: Log):
    from mbb.analysis import with_run_info
    from mbb.core.tables import tables_from_lines

    by_kind: dict[str, list[str]] = defaultdict(list)
    for log in logs:
        for k, lines in log.by_kind.items():
            by_kind[k].extend(lines)
    return with_run_info(tables_from_lines(by_kind), by_kind=by_kind)


@pytest.fixture
def events():
    """(Log, tables_of) for tests that build their own small run."""
    return Log, tables_of


@pytest.fixture
def scen():
    return tables_of(build_scenario())


@pytest.fixture
def scen_ev(scen):
    from mbb.analysis import classify_evidence

    return classify_evidence(scen)
