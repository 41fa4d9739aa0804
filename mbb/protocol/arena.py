"""The arena: runs one condition (N workers x S subruns) exactly per the protocol.

Time is a virtual clock in seconds since the subrun started. It advances only while an
execution window runs; the negotiation phases take no simulated time. Waiting in the queue
therefore costs deadline time, negotiating does not. A round starts when the resource is idle
and the queue is not empty. The condition's mechanism (`mbb.protocol.mechanisms`: the
negotiated phases of `mbb.protocol.phases`, or a centralized scheduler) decides its schedule;
the arena publishes it and runs the windows one after another, on one path for every
mechanism. The holder pays when its window starts; a window ends at its allocation, at its
holder's deadline (hard cut-off), or as soon as the holder finishes or releases. A worker whose
deadline passes is terminated for the subrun. Rules come from `mbb.protocol.rules`; the agents,
the execution resource and the task suite are built by `mbb.batch.build` and handed in; every
agent call is guarded (`Arena.guarded`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mbb.core import eventlog
from mbb.core import events as ev
from mbb.core.agent_api import (
    Negotiator,
    PastRound,
    Solver,
    TaskAssignment,
)
from mbb.core.provenance import provenance
from mbb.core.scratch import Scratch
from mbb.params import Condition, WorkerSpec
from mbb.protocol import phases
from mbb.protocol.context import FAILED, Round, RunContext
from mbb.protocol.mechanisms import mechanism_for
from mbb.tasks import workload

__all__ = ["Arena", "RunResult"]

T = TypeVar("T")


# scratch kinds that are after-action reports: the negotiator's and the solver's
_REPORTS = frozenset({"report", "solver_report"})


@dataclass
class RunResult:
    run_id: str
    seed: int
    out_dir: Path | None
    log: eventlog.EventLog
    status: str = "completed"
    error: str | None = None
    lines: list[str] = field(default_factory=list)


class Arena(RunContext):
    """Runs one seed of a condition: subruns of rounds, each round's schedule decided by the
    condition's mechanism (`mbb.protocol.mechanisms`) and published, paid and executed here.

    Everything a run needs from outside is given, built by `mbb.batch.build`: `agents`, each
    worker's (negotiator, solver) keyed by worker id in `condition.worker_specs(seed)` order;
    `resource`, the shared execution resource of a real-task run (its windows are closed and
    their used time read here); `suite`, the task suite tasks are assigned from on real tasks.
    The arena keeps the clock, the rounds and the phases; it closes nothing it was given."""

    def __init__(
        self,
        condition: Condition,
        seed: int,
        log: eventlog.EventLog,
        agents: Mapping[str, tuple[Negotiator, Solver]],
        *,
        resource: Any = None,
        suite: Any = None,
    ) -> None:
        super().__init__(condition, seed, log, agents, resource=resource, suite=suite)
        self.mechanism = mechanism_for(condition.mechanism.kind)

    # --- the run -------------------------------------------------------------------------------
    async def run(self) -> None:
        c = self.condition
        self.emit(
            ev.RunStarted,
            condition=c.name,
            seed=self.seed,
            params=c.model_dump(mode="json"),
            workers=[self._worker_record(s) for s in self.specs],
            provenance=provenance(),
        )
        for subrun in range(1, c.subruns + 1):
            await self.run_subrun(subrun)
        self.log.subrun = self.log.round = None
        self.emit(ev.RunEnded, status="completed")

    def _worker_record(self, spec: WorkerSpec) -> dict[str, Any]:
        """A worker as `run_started` records it: its resolved spec, plus `solver_settings`
        when its solver resolves settings of its own (a modeled solver's `estimate_log_sd`,
        which depends on the negotiator backend: `mbb.agents.modeled`)."""
        record = spec.model_dump(mode="json")
        settings = getattr(self.workers[spec.id].solver, "settings", None)
        if settings is not None:
            record["solver_settings"] = dict(settings)
        return record

    def assign_tasks(self, subrun: int) -> dict[str, tuple[str, float]]:
        return workload.assign_tasks(
            self.condition, self.seed, subrun, self.present, self.rng, self.suite
        )

    async def run_subrun(self, subrun: int) -> None:
        c = self.condition
        self.t = 0.0
        self.log.subrun, self.log.round = subrun, None
        self.board.clear_visible_before(subrun)
        self.present = []
        for w in self.workers.values():
            if not w.spec.present_in(subrun):
                w.status = "absent"
                continue
            self.present.append(w.id)
            if w.spec.joins == subrun and subrun > 1:  # a newcomer: fresh budget, no memory
                self.ledger.grant(w.id, w.spec.budget)
        tasks = self.assign_tasks(subrun)
        self._deadline_order = sorted((self.workers[w].spec.deadline_s, w) for w in self.present)
        self._deadline_next = 0
        for w in map(self.workers.__getitem__, self.present):
            w.status, w.windows, w.granted_s, w.used_s, w.waited_s, w.spent = (
                "active",
                0,
                0.0,
                0.0,
                0.0,
                0,
            )
            w.requested_at, w.thought_s = None, 0.0
            w.task, w.work_s = tasks[w.id]
            self.carry_memory(w.scratch)
            if c.budget.reset_each_subrun and subrun > 1:
                self.ledger.reset(w.id, w.spec.budget)
        self.emit(
            ev.SubrunStarted,
            workers=[  # validated as ev.WorkerAtStart with the event (once)
                {
                    "worker": w.id,
                    "task": w.task,
                    "work_s": w.work_s,
                    "budget": self.ledger.balances[w.id],
                    "deadline_s": w.spec.deadline_s,
                    "scratch_chars": w.scratch.chars,
                }
                for w in map(self.workers.__getitem__, self.present)
            ],
        )
        for w in map(self.workers.__getitem__, self.present):
            memory = self.memory_of(w)
            started = await self.guarded(
                w.id,
                "subrun start",
                "withdrawn for this subrun",
                w.solver.start_subrun(TaskAssignment(w.task, w.work_s, subrun), memory),
            )
            if started is FAILED:
                w.status = "withdrawn"
                self.emit(ev.Withdrawn, w.id, reason="solver failed to start the task")
            await self.guarded(
                w.id,
                "subrun start",
                "negotiator starts with no memory",
                w.negotiator.start_subrun(subrun, memory),
            )
        queue: list[str] = []
        past: list[PastRound] = []
        for wid in self.present:
            if self.workers[wid].active:
                await self.poll(wid, queue)
        rounds = 0
        reason = "all_done"
        present = [self.workers[wid] for wid in self.present]
        while any(ws.active for ws in present):
            candidates = [wid for wid in queue if self.workers[wid].active]
            queue.clear()
            if not candidates:
                for wid in self.present:
                    if self.workers[wid].active:
                        await self.poll(wid, queue)
                if not queue:
                    reason = "stalled"
                    for wid in self.present:
                        if self.workers[wid].active:
                            self.workers[wid].status = "withdrawn"
                            self.emit(
                                ev.Withdrawn,
                                wid,
                                reason="idle: no request with the "
                                "resource idle (stated rule: withdraw)",
                            )
                    break
                continue
            if rounds >= c.time.max_rounds_per_subrun:
                reason = "max_rounds"
                break
            rounds += 1
            await self.run_round(Round(subrun, rounds, candidates, queue, past))
            self.log.flush()
        self.log.round = None
        await phases.end_subrun(self, subrun, rounds, reason, past)
        self.log.flush()

    # --- memory and after-action reports (two switches) ----------------------------------------
    def carry_memory(self, scratch: Scratch) -> None:
        """At a subrun start: with memory off, scratch keeps only the after-action reports (when
        reports are on), else nothing; with reports off, no report is ever accepted."""
        plan = self.plan
        if not (plan.memory or plan.reports):
            scratch.wipe()
        elif not plan.memory:
            scratch.restrict(allow=_REPORTS)
        elif not plan.reports:
            scratch.restrict(refuse=_REPORTS)

    async def run_round(self, rnd: Round) -> None:
        """One round: the mechanism decides a schedule; it is published, then each window is
        paid for at its start and run, in order (the same path for every mechanism)."""
        self.log.round = rnd.number
        self.emit(ev.RoundStarted, candidates=list(rnd.candidates))
        schedule = await self.mechanism.schedule(self, rnd)
        if schedule is None:
            return
        record = phases.publish(self, rnd, schedule)
        for pos in range(1, len(schedule.order) + 1):
            await phases.execute(self, rnd, schedule, record, pos)
        if self.plan.reasoning_published:
            phases.publish_ballot_reasoning(self, rnd, record)
