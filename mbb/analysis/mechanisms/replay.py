"""Counterfactual replay: re-schedule a finished run's recorded demand under another mechanism.

"Recorded demand" is exactly what the run's events fix, nothing re-drawn:

- the condition and seed (`run_started.params`, `run_started.seed`) and so the population, the
  window bounds, the starting budgets and the private deadlines;
- per subrun, each worker's task and the execution seconds it needs (`subrun_started.workers`:
  `task`, `work_s`; checked against the deadlines and budgets recorded there);
- the modeled solvers' randomness (efficiency, per-window set-up), re-derived from the seed with
  `mbb.agents.backends.worker_rng`; set-up draws are consumed window by window, so the k-th
  window a worker gets costs the same set-up under every mechanism; and the solvers' request
  rule of the original run: a modeled solver whose original negotiator was a language model
  requests with its per-stage estimation error (`mbb.agents.modeled`, drawn stage by stage, so
  the same under every mechanism), although the replay's negotiators are recorded ones;
- for the bid mechanisms (auctions, proportional share) only: the sealed bid each worker
  declared, in order, within each subrun (`declared`, revisions excluded; a withdrawal in the
  declaration phase counts as one entry), and its declared duration: "the whole request" when
  it equalled the worker's latest `requested` duration, otherwise the recorded seconds (capped
  by the current request). The replay's k-th declaration of a worker in a subrun reuses its
  k-th recorded one; past the end it repeats the last (bid 0, whole request when none).

Requests themselves are not replayed at fixed times: a worker asks for a window when it is idle,
as in the original (the solver's request rule), so the timing follows the new schedule. The
negotiators are never consulted; non-bid mechanisms never ask them anything.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mbb.agents.backends import SOLVERS, build_agents
from mbb.core import eventlog
from mbb.core.actions import Ballot, ConversationTurn, Declaration, Withdraw
from mbb.core.agent_api import RoundView, SubrunRecap
from mbb.core.aio import run_coroutine
from mbb.core.scratch import Scratch
from mbb.params import Condition, deep_merge
from mbb.protocol.arena import Arena, RunResult

__all__ = [
    "RecordedDemand",
    "RecordedNegotiator",
    "ReplayError",
    "recorded_demand",
    "replay",
]


class ReplayError(ValueError):
    """The events cannot be replayed exactly (and the message says why)."""


@dataclass(frozen=True, kw_only=True)
class RecordedDemand:
    """Everything a replay takes from a finished run (see the module docstring)."""

    run_id: str
    seed: int
    params: dict[str, Any]
    tasks: dict[int, dict[str, tuple[str, float]]]  # subrun -> worker -> (task, work_s)
    deadlines: dict[int, dict[str, float]]
    # (subrun, worker) -> [(bid, declared seconds or None for "the whole request")]; None: withdrew
    bids: dict[tuple[int, str], list[tuple[int, int | None] | None]] = field(default_factory=dict)

    @property
    def condition(self) -> Condition:
        return Condition.model_validate(self.params)


def _records(source: str | Path | Iterable[str]) -> list[dict[str, Any]]:
    lines = eventlog.read_lines(source) if isinstance(source, str | Path) else list(source)
    return [json.loads(x) for x in lines]


def recorded_demand(source: str | Path | Iterable[str]) -> RecordedDemand:
    """Read the demand of one run from its events.jsonl path or its event lines."""
    recs = _records(source)
    start = next((r for r in recs if r["kind"] == "run_started"), None)
    if start is None:
        raise ReplayError("no run_started event: cannot recover the params and seed")
    tasks: dict[int, dict[str, tuple[str, float]]] = {}
    deadlines: dict[int, dict[str, float]] = {}
    bids: dict[tuple[int, str], list[tuple[int, int | None] | None]] = defaultdict(list)
    wanted: dict[tuple[int, str], int] = {}
    declared_in: set[tuple[int, int, str]] = set()
    candidates: dict[tuple[int, int], set[str]] = {}
    for r in recs:
        k = r["kind"]
        if k == "subrun_started":
            tasks[r["subrun"]] = {w["worker"]: (w["task"], w["work_s"]) for w in r["workers"]}
            deadlines[r["subrun"]] = {w["worker"]: w["deadline_s"] for w in r["workers"]}
        elif k == "round_started":
            candidates[(r["subrun"], r["round"])] = set(r["candidates"])
        elif k == "requested":
            wanted[(r["subrun"], r["worker"])] = r["duration"]
        elif k == "declared" and not r.get("revision"):
            whole = wanted.get((r["subrun"], r["worker"])) == r["duration"]
            bids[(r["subrun"], r["worker"])].append((r["bid"], None if whole else r["duration"]))
            declared_in.add((r["subrun"], r["round"], r["worker"]))
        elif k == "withdrawn" and r.get("round") is not None:
            key = (r["subrun"], r["round"])
            # a withdrawal in the declaration phase: a candidate that never declared that round
            if r["worker"] in candidates.get(key, ()) and (*key, r["worker"]) not in declared_in:
                bids[(r["subrun"], r["worker"])].append(None)
    solvers = {w["solver"] for w in start["workers"]}
    if solvers - {"modeled"}:
        raise ReplayError(
            f"run {start['run_id']}: only modeled solvers can be replayed exactly (found "
            f"{sorted(solvers)}); a real or LLM solver's work is not a function of the seed"
        )
    return RecordedDemand(
        run_id=start["run_id"],
        seed=start["seed"],
        params=start["params"],
        tasks=tasks,
        deadlines=deadlines,
        bids=dict(bids),
    )


class RecordedNegotiator:
    """Replays recorded sealed bids; answers conversation and ballots neutrally (never used)."""

    concurrent = False

    def __init__(
        self, worker: str, bids: Mapping[tuple[int, str], Sequence[tuple[int, int | None] | None]]
    ) -> None:
        self.worker = worker
        self._bids = bids
        self._subrun = 0
        self._k = 0

    async def start_subrun(self, subrun: int, scratch: Scratch | None) -> None:
        self._subrun, self._k = subrun, 0

    async def declare(self, view: RoundView) -> Declaration | Withdraw:
        seq = self._bids.get((self._subrun, self.worker), [])
        entry = seq[min(self._k, len(seq) - 1)] if seq else (0, None)
        self._k += 1
        if entry is None:
            return Withdraw(reason="withdrew here in the recorded run")
        bid, dur = entry
        dur = view.wanted_s if dur is None else min(dur, view.wanted_s)
        return Declaration(bid=bid, duration=dur, position=1, note="recorded bid")

    async def converse(self, view: RoundView) -> ConversationTurn:
        return ConversationTurn()

    async def vote(self, view: RoundView) -> Ballot:
        bids = {c: d.bid for c, d in view.declarations.items()}
        order = sorted(view.candidates, key=lambda c: -bids.get(c, 0))
        return Ballot(ranking=tuple(order), allocations={c: view.wanted_s for c in order})

    async def end_subrun(self, recap: SubrunRecap, scratch: Scratch | None) -> None:
        return None


@dataclass
class _ReplayServices:
    """What a replay's agents may use: the condition and the log (modeled solvers only)."""

    condition: Condition
    log: eventlog.EventLog

    def emit(self, kind: Any, worker: str | None = None, /, **payload: Any) -> None:
        self.log.emit(kind, worker, **payload)

    def llm(self) -> tuple[Any, Any]:
        raise ReplayError("a replay makes no LLM calls")

    def tasks(self) -> tuple[Any, Any]:
        raise ReplayError("a replay runs modeled tasks only")


class ReplayArena(Arena):
    """An arena whose tasks come from the record and whose negotiators replay recorded bids;
    its modeled solvers are built from their registered backend, on the run's own streams."""

    def __init__(
        self, condition: Condition, demand: RecordedDemand, log: eventlog.EventLog
    ) -> None:
        # the original workers: a modeled solver requests as it did there (its estimation error
        # depends on the negotiator backend, which the replay replaces by recorded bids)
        original = {s.id: s for s in demand.condition.worker_specs(demand.seed)}
        agents = build_agents(
            _ReplayServices(condition, log),
            condition.worker_specs(demand.seed),
            demand.seed,
            negotiators={
                "scripted": lambda run, spec, rng: RecordedNegotiator(spec.id, demand.bids)
            },
            solvers={
                "modeled": lambda run, spec, rng: SOLVERS["modeled"].build(
                    run, original[spec.id], rng
                )
            },
        )
        super().__init__(condition, demand.seed, log, agents)
        self.demand = demand

    def assign_tasks(self, subrun: int) -> dict[str, tuple[str, float]]:
        try:
            recorded = self.demand.tasks[subrun]
        except KeyError:
            raise ReplayError(
                f"{self.demand.run_id}: no subrun_started for subrun {subrun} "
                "(the run ended early); replay its completed subruns only"
            ) from None
        self.present = [w for w in self.ids if self.workers[w].spec.present_in(subrun)]
        missing = sorted(set(self.present) - set(recorded))
        if missing:
            raise ReplayError(f"{self.demand.run_id} subrun {subrun}: no task for {missing}")
        for w in self.present:
            got = self.demand.deadlines[subrun][w]
            if abs(got - self.workers[w].spec.deadline_s) > 1e-9:
                raise ReplayError(
                    f"{self.demand.run_id}: {w}'s recorded deadline {got} s differs "
                    f"from its params ({self.workers[w].spec.deadline_s} s)"
                )
        return {w: recorded[w] for w in self.present}


def replay(
    source: str | Path | Iterable[str] | RecordedDemand,
    mechanism: str,
    out_dir: Path | None = None,
    *,
    quantum_s: int | None = None,
) -> RunResult:
    """Re-run the recorded demand with `mechanism` (any `mechanism.kind`) deciding every round.

    The replay's run id is `<original run id>~<mechanism>`; with `out_dir` its events are
    written to `out_dir/<that id>/events.jsonl`. Negotiated replays are allowed but answer with
    the recorded bids and price-order ballots, so they are not the agents' institutions.
    """
    demand = source if isinstance(source, RecordedDemand) else recorded_demand(source)
    mech: dict[str, Any] = {"kind": mechanism}
    if quantum_s is not None:
        mech["quantum_s"] = quantum_s
    params = deep_merge(demand.params, {"mechanism": mech, "workers": {"negotiator": "scripted"}})
    for o in params["workers"].get("overrides", {}).values():
        o["negotiator"] = None  # the recorded bids stand in for every negotiator backend
    params["subruns"] = min(params["subruns"], max(demand.tasks, default=0)) or params["subruns"]
    condition = Condition.model_validate(params)
    run_id = f"{demand.run_id}~{mechanism}"
    run_dir = out_dir / run_id if out_dir is not None else None
    log = eventlog.EventLog(run_id, run_dir / "events.jsonl" if run_dir else None)
    result = RunResult(run_id, demand.seed, run_dir, log)
    try:
        arena = ReplayArena(condition, demand, log)
        run_coroutine(arena.run)
    finally:
        log.close()
    return result
