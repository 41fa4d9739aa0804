"""Shared helpers for the tests: run a condition, read its events, check invariants; write a tiny
notebook.

Nothing here talks to the internet or an LLM; every run uses the scripted/modeled backends or
the tiny test backends defined below.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mbb.agents.backends import NEGOTIATORS, SOLVERS
from mbb.batch.build import load_params
from mbb.core import eventlog
from mbb.core import events as ev
from mbb.core.actions import Ballot, ConversationTurn, Declaration, Request, Withdraw
from mbb.core.agent_api import (
    EvaluationResult,
    RoundView,
    SolverView,
    SubrunRecap,
    TaskAssignment,
    WindowGrant,
    WindowOutcome,
)
from mbb.core.scratch import Scratch
from mbb.params import Condition
from mbb.protocol.arena import Arena

EPS = 1e-9
NEGOTIATION_KINDS = ("round_started", "declared", "message", "ballot", "schedule_published")


def condition(mapping: Mapping[str, Any] | None = None, **overrides: Any) -> Condition:
    """A validated condition from a mapping (defaults = params defaults)."""
    return load_params(dict(mapping or {}), overrides or None)


@dataclass
class Run:
    arena: Arena
    lines: list[str]
    events: list[dict[str, Any]] = field(default_factory=list)

    def of(self, *kinds: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] in kinds]


def run(cond: Condition, seed: int = 0) -> Run:
    """Run one seed in memory, built as `mbb.batch.build` builds it, and keep the arena (for
    its final ledger)."""
    from mbb.batch.build import RunServices, build_arena, ensure_condition
    from mbb.batch.runs import run_id_of

    cond = ensure_condition(cond)
    log = eventlog.EventLog(run_id_of(cond, seed))  # <condition>[-<model>]-seedNNNN, as the builder
    services = RunServices(cond, log)

    async def go() -> Arena:
        try:
            arena = build_arena(cond, seed, log, services)
            await arena.run()
            return arena
        finally:
            await services.aclose()

    arena = asyncio.run(go())
    log.close()
    return Run(arena, list(log.lines), [json.loads(ln) for ln in log.lines])


def by_subrun(events: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e["subrun"] is not None:
            out[e["subrun"]].append(e)
    return dict(out)


def deadlines(events: list[dict[str, Any]]) -> dict[tuple[int, str], float]:
    """(subrun, worker) -> deadline_s, from subrun_started."""
    return {
        (e["subrun"], w["worker"]): w["deadline_s"]
        for e in events
        if e["kind"] == "subrun_started"
        for w in e["workers"]
    }


# --- invariants ---------------------------------------------------------------------------------
def check_invariants(r: Run, cond: Condition) -> None:
    """Every protocol invariant that must hold for any condition and seed."""
    events, lines = r.events, r.lines
    # the log: seq 0,1,2,...; every line validates; the run ends completed
    assert [e["seq"] for e in events] == list(range(len(events)))
    parsed = ev.parse_events(lines)
    assert [p.kind for p in parsed] == [e["kind"] for e in events]
    assert [eventlog.kind_of(ln) for ln in lines] == [e["kind"] for e in events]
    assert events[0]["kind"] == "run_started"
    assert events[-1]["kind"] == "run_ended" and events[-1]["status"] == "completed"
    assert sum(e["kind"] == "run_ended" for e in events) == 1

    dl = deadlines(events)
    specs = {s.id: s for s in cond.worker_specs()}
    for sub, evs in by_subrun(events).items():
        # time never runs backwards within a subrun
        ts = [e["t"] for e in evs]
        assert all(a <= b + EPS for a, b in itertools.pairwise(ts)), "clock went backwards"

        # windows: one holder at a time, back to back within a round, within the deadline
        ended = [e for e in evs if e["kind"] == "window_ended"]
        spans = sorted((e["start"], e["start"] + e["used"], e["worker"]) for e in ended)
        for (_, end_a, wa), (start_b, _, wb) in itertools.pairwise(spans):
            assert start_b >= end_a - 1e-6, f"two holders at once: {wa} and {wb}"
        for e in ended:
            deadline = dl[(sub, e["worker"])]
            assert e["start"] < deadline, "a window started at/after its holder's deadline"
            assert e["start"] + e["used"] <= deadline + 1e-6, "a window ran past the deadline"
            assert 0 <= e["used"] <= e["allocation"] + 1e-6
        for e in evs:
            if e["kind"] == "window_started":
                assert e["t"] < dl[(sub, e["worker"])]

        # payments: only at window start, immediately followed by that window, price == amount
        for i, e in enumerate(evs):
            if e["kind"] == "payment":
                nxt = evs[i + 1]
                assert nxt["kind"] == "window_started" and nxt["worker"] == e["worker"]
                assert nxt["t"] == e["t"] and nxt["price"] == e["amount"] > 0
                assert e["balance"] >= 0 and e["rule"] == cond.mechanism.payment
            if e["kind"] == "window_started":
                prev = evs[i - 1]
                paid = prev["kind"] == "payment" and prev["worker"] == e["worker"]
                assert paid == (e["price"] > 0), "a window with a price and no payment (or v.v.)"
        if cond.mechanism.payment == "none":
            assert not [e for e in evs if e["kind"] == "payment"]

        # termination at the deadline (moved earlier by charged thinking, and then possibly
        # already passed when the thinking ends), once, and nothing from that worker afterwards
        term = {}
        thought: dict[str, float] = defaultdict(float)
        for e in evs:
            if e["kind"] == "thinking_charged":
                thought[e["worker"]] += e["seconds"]
                assert e["deadline_s"] == dl[(sub, e["worker"])] - thought[e["worker"]]
            if e["kind"] == "terminated":
                assert e["worker"] not in term, "terminated twice"
                assert e["deadline_s"] == dl[(sub, e["worker"])] - thought[e["worker"]]
                assert e["t"] == e["deadline_s"] or (
                    thought[e["worker"]] and e["t"] >= e["deadline_s"]
                )
                term[e["worker"]] = e["seq"]
        for e in evs:
            w = e["worker"]
            if w in term and e["seq"] > term[w]:
                after_action = e["kind"] == "llm_call" and e["role"] in ("report", "summary")
                assert after_action or e["kind"] in (
                    "window_dropped",
                    "evaluation",
                    "scratch_written",
                ), e
                if e["kind"] == "window_dropped":
                    assert e["reason"] == "terminated"
            # nobody acts at or after its own deadline
            if w is not None and e["kind"] in ("requested", "declared", "ballot", "message"):
                assert e["t"] < dl[(sub, w)], f"{w} acted at/after its deadline: {e['kind']}"

        # every worker is evaluated once per subrun
        assert sorted(e["worker"] for e in evs if e["kind"] == "evaluation") == sorted(specs)

    check_ledger(r, cond)
    check_rounds(r, cond)


def check_ledger(r: Run, cond: Condition) -> None:
    """Reconstruct every balance from events; nothing is created or lost, nothing goes below 0."""
    events = r.events
    specs = {s.id: s for s in cond.worker_specs()}
    balance: dict[str, int] = {}
    granted = 0
    paid = 0
    for e in events:
        if e["kind"] == "subrun_started":
            for w in e["workers"]:
                wid, b = w["worker"], w["budget"]
                assert b >= 0
                if wid not in balance:  # first subrun: the starting grant
                    assert b == specs[wid].budget
                    granted += b
                elif cond.budget.reset_each_subrun:
                    assert b == specs[wid].budget, "budget not restored at subrun start"
                    granted += b - balance[wid]
                else:
                    assert b == balance[wid], "budget changed between subruns"
                balance[wid] = b
        elif e["kind"] == "payment":
            balance[e["worker"]] -= e["amount"]
            paid += e["amount"]
            assert e["balance"] == balance[e["worker"]] >= 0
    assert sum(balance.values()) + paid == granted
    ledger = r.arena.ledger
    assert ledger.balances == balance
    assert ledger.revenue == paid and ledger.granted == granted


# --- tiny test backends -------------------------------------------------------------------------
class FixedSolver:
    """A solver that needs `need` seconds and uses every window it gets in full.

    `request` is the duration it asks for; `release_after` makes it release early after that
    many seconds of each window; it completes once `need` seconds of window time were used.
    """

    concurrent = False

    def __init__(
        self,
        worker: str,
        *,
        need: float,
        request: int,
        release_after: float | None = None,
    ) -> None:
        self.worker = worker
        self.need = need
        self.request = request
        self.release_after = release_after
        self.done_s = 0.0
        self.grants: list[WindowGrant] = []

    async def start_subrun(self, task: TaskAssignment, scratch: Scratch | None) -> None:
        self.done_s = 0.0

    @property
    def done(self) -> bool:
        return self.done_s >= self.need

    @property
    def progress(self) -> float:
        return min(1.0, self.done_s / self.need)

    def need_s(self) -> float:
        return max(0.0, self.need - self.done_s)

    async def next_action(self, view: SolverView) -> Request | Withdraw | None:
        return None if self.done else Request(duration=self.request)

    async def run_window(self, grant: WindowGrant) -> WindowOutcome:
        self.grants.append(grant)
        length = grant.hard_end_s - grant.start_s
        remaining = self.need - self.done_s
        if remaining <= length and (self.release_after is None or remaining <= self.release_after):
            self.done_s = self.need
            return WindowOutcome(used_s=remaining, completed=True, released=remaining < length)
        if self.release_after is not None and self.release_after < length:
            self.done_s += self.release_after
            return WindowOutcome(used_s=self.release_after, completed=False, released=True)
        self.done_s += length
        return WindowOutcome(used_s=length, completed=False, released=False)

    async def evaluate(self) -> EvaluationResult:
        p = self.progress
        return EvaluationResult(score=p, passed=int(p * 10), total=10, progress=p)


class PlainNegotiator:
    """Bids `bid`, asks for the requested duration, votes queue order; overridable per phase."""

    concurrent = False

    def __init__(
        self,
        worker: str,
        *,
        bid: int = 0,
        declare: Callable[[RoundView], Declaration | Withdraw] | None = None,
        converse: Callable[[RoundView], ConversationTurn] | None = None,
        vote: Callable[[RoundView], Ballot] | None = None,
        end: Callable[[SubrunRecap, Scratch | None], None] | None = None,
    ) -> None:
        self.worker = worker
        self.bid = bid
        self._declare, self._converse, self._vote, self._end = declare, converse, vote, end

    async def start_subrun(self, subrun: int, scratch: Scratch | None) -> None:
        return None

    async def declare(self, v: RoundView) -> Declaration | Withdraw:
        if self._declare:
            return self._declare(v)
        return Declaration(bid=min(self.bid, v.budget), duration=v.wanted_s, position=1)

    async def converse(self, v: RoundView) -> ConversationTurn:
        return self._converse(v) if self._converse else ConversationTurn()

    async def vote(self, v: RoundView) -> Ballot:
        return self._vote(v) if self._vote else Ballot(ranking=tuple(v.candidates))

    async def end_subrun(self, recap: SubrunRecap, scratch: Scratch | None) -> None:
        if self._end:
            self._end(recap, scratch)


def install_backends(monkeypatch, negotiators=None, solvers=None) -> None:
    """Replace the "scripted"/"modeled" factories with per-worker test backends.

    `negotiators` / `solvers` map a worker id to a zero-argument-free factory `f(worker_id)`;
    workers not listed keep the real backend.
    """
    real_neg = NEGOTIATORS["scripted"]
    real_sol = SOLVERS["modeled"]

    def neg_factory(run, spec, rng):
        make = (negotiators or {}).get(spec.id)
        return make(spec.id) if make else real_neg.build(run, spec, rng)

    def sol_factory(run, spec, rng):
        make = (solvers or {}).get(spec.id)
        return make(spec.id) if make else real_sol.build(run, spec, rng)

    replace_backend(monkeypatch, NEGOTIATORS, "scripted", neg_factory)
    replace_backend(monkeypatch, SOLVERS, "modeled", sol_factory)


def replace_backend(monkeypatch, registry, name: str, build) -> None:
    """For one test, the registered backend `name` builds its agents with `build`."""
    monkeypatch.setitem(registry._entries, name, dataclasses.replace(registry[name], build=build))


def rounds_of(events: list[dict[str, Any]]) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """(subrun, round) -> that round's events, in order."""
    out: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e["subrun"] is not None and e["round"] is not None:
            out[(e["subrun"], e["round"])].append(e)
    return dict(out)


def check_rounds(r: Run, cond: Condition) -> None:
    """Each published schedule follows from the round's public record, and runs as published.

    From the events alone: candidates (round_started minus declaration-phase withdrawals), the
    final declarations (revisions included), the ballots and the bids give the schedule by the
    condition's aggregation rule (validated against brute force in test_aggregation), its
    allocations by the allocation rule; windows then run (or are dropped) in that order.
    """
    import statistics

    from mbb.protocol.rules import aggregate

    mech, win = cond.mechanism, cond.windows
    balance: dict[str, int] = {}
    population = [s.id for s in cond.worker_specs()]
    for e in r.events:  # balances as every declaration saw them
        if e["kind"] == "subrun_started":
            balance.update({w["worker"]: w["budget"] for w in e["workers"]})
        elif e["kind"] == "payment":
            balance[e["worker"]] = e["balance"]
        elif e["kind"] == "declared":
            assert 0 <= e["bid"] <= balance[e["worker"]], "bid outside 0..budget"
            assert win.min_s <= e["duration"] <= win.max_s
            assert e["position"] >= 1
        elif e["kind"] == "message":
            assert e["to"] is None or (e["to"] in population and e["to"] != e["worker"])

    for key, rnd in rounds_of(r.events).items():
        start = rnd[0]
        assert start["kind"] == "round_started", key
        sched_i = next((i for i, e in enumerate(rnd) if e["kind"] == "schedule_published"), None)
        before = rnd if sched_i is None else rnd[:sched_i]
        gone = {e["worker"] for e in before if e["kind"] == "withdrawn"}
        cands = [w for w in start["candidates"] if w not in gone]
        decl: dict[str, dict[str, Any]] = {}
        for e in before:
            if e["kind"] == "declared":
                assert e["position"] <= len(start["candidates"])
                decl[e["worker"]] = e
        assert set(decl) == set(cands), key
        if sched_i is None:
            assert not cands and not [e for e in rnd if e["kind"].startswith("window_")]
            continue
        sched = rnd[sched_i]
        ballots = {e["worker"]: e for e in before if e["kind"] == "ballot"}
        assert list(ballots) == cands, "one ballot per candidate, in queue order"
        for b in ballots.values():
            assert sorted(b["ranking"]) == sorted(cands), "a ballot that is not a full ranking"
            for x, a in zip(b["ranking"], b["allocations"], strict=True):
                assert 0 <= a <= decl[x]["duration"]
        bids = {w: decl[w]["bid"] for w in cands}
        rankings = [ballots[w]["ranking"] for w in cands]
        want = aggregate(mech.aggregation, cands, rankings, bids, exact_max=mech.kemeny_exact_max)
        assert (sched["order"], sched["rule"]) == (want.order, want.rule), key
        assert sched["bids"] == [bids[x] for x in want.order]
        assert sched["ballots_unanimous"] == (len({tuple(x) for x in rankings}) == 1)
        if mech.allocation == "declared":
            alloc = [decl[x]["duration"] for x in want.order]
        else:
            alloc = [
                min(
                    decl[x]["duration"],
                    int(
                        statistics.median_low(
                            b["allocations"][b["ranking"].index(x)] for b in ballots.values()
                        )
                    ),
                )
                for x in want.order
            ]
        assert sched["allocations"] == alloc
        runs = [e for e in rnd[sched_i:] if e["kind"] in ("window_started", "window_dropped")]
        assert [(e["position"], e["worker"], e["allocation"]) for e in runs] == [
            (i + 1, x, a) for i, (x, a) in enumerate(zip(want.order, alloc, strict=True))
        ], "windows did not run as published"


def spec_values(spec: Any, key: str) -> list[Any]:
    """Every value under `key` anywhere in a Vega or Vega-Lite spec (nested dicts and lists),
    in document order; the walk does not descend into a matched value."""
    out: list[Any] = []
    if isinstance(spec, dict):
        for k, v in spec.items():
            out += [v] if k == key else spec_values(v, key)
    elif isinstance(spec, list):
        for v in spec:
            out += spec_values(v, key)
    return out


def tiny_notebook(path: Path, last_cell: str) -> Path:
    """Write a two-cell Python notebook to `path` for the notebook-execution tests: a
    "parameters" cell (`x = 1`, for a run to override) and then `last_cell`; return `path`."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    params = nbformat.v4.new_code_cell("x = 1")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(last_cell)]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path
