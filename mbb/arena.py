"""The arena: runs one condition (N workers x S subruns) exactly per the protocol.

Time is a virtual clock in seconds since the subrun started. It advances only while an
execution window runs; the negotiation phases take no simulated time. Waiting in the queue
therefore costs deadline time, negotiating does not. A round starts when the resource is idle
and the queue is not empty: declarations -> conversation -> ballots -> aggregation -> the
published windows run one after another. The holder pays when its window starts; a window ends
at its allocation, at its holder's deadline (hard cut-off), or as soon as the holder finishes
or releases. A worker whose deadline passes is terminated for the subrun.
"""

from __future__ import annotations

import asyncio
import functools
import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from mbb import events as ev
from mbb.agents.base import (
    BackendFatal,
    Negotiator,
    PastRound,
    RoundView,
    Solver,
    SolverView,
    SubrunRecap,
    TaskAssignment,
    WindowGrant,
)
from mbb.agents.modeled import ModeledSolver
from mbb.agents.personas import make_scripted_negotiator
from mbb.board import Board
from mbb.llm.budget import BudgetExhausted
from mbb.params import Condition, WorkerSpec
from mbb.provenance import provenance
from mbb.scheduling.actions import (
    Ballot,
    ConversationTurn,
    Declaration,
    Request,
    Withdraw,
    as_payload,
)
from mbb.scheduling.aggregation import aggregate, tie_break_order
from mbb.scheduling.ledger import Ledger
from mbb.scheduling.validation import (
    Issue,
    default_ballot,
    repair_ballot,
    repair_declaration,
    repair_message,
)
from mbb.scratch import Scratch
from mbb.tasks import workload

__all__ = [
    "Arena",
    "RunResult",
    "run_condition",
    "run_condition_async",
    "run_id_for",
    "run_id_of",
    "run_seeds",
    "uses_llm",
    "worker_rng",
]

T = TypeVar("T")


def worker_rng(seed: int, index: int, role: int) -> np.random.Generator:
    """Independent stream per (run seed, worker index, role); role 0 negotiator, 1 solver."""
    return np.random.default_rng(np.random.SeedSequence(entropy=seed, spawn_key=(index, role)))


RngSource = Callable[[], np.random.Generator]  # the same generator on every call


def lazy_worker_rng(seed: int, index: int, role: int) -> RngSource:
    """`worker_rng`, seeded on the first call: seeding costs ~15 µs, and a negotiator under a
    centralized scheduler without bids never draws."""
    return functools.cache(functools.partial(worker_rng, seed, index, role))


def _round4(x: float) -> float:
    """round(x, 4) for a recorded progress or score. Most are 0 or 1, returned as they are:
    round() converts through decimal digits, which costs as much as writing the event."""
    return x if x == 0 or x == 1 else round(x, 4)


def run_id_for(condition: str, seed: int, model: str | None = None) -> str:
    """`<condition>-seedNNNN`; with LLM workers `<condition>-<model>-seedNNNN` (mbb.study)."""
    if model:
        return f"{condition}-{model}-seed{seed:04d}"
    return f"{condition}-seed{seed:04d}"


def run_id_of(condition: Condition, seed: int) -> str:
    from mbb.study import model_label

    return run_id_for(condition.name, seed, model_label(condition))


@dataclass(slots=True, eq=False)
class WorkerState:
    spec: WorkerSpec
    negotiator: Negotiator
    solver: Solver
    scratch: Scratch
    task: str = ""
    work_s: float = 0.0
    windows: int = 0
    granted_s: float = 0.0
    used_s: float = 0.0
    waited_s: float = 0.0
    spent: int = 0
    requested_at: float | None = None
    wanted_s: int = 0
    id: str = field(init=False)
    active: bool = field(init=False, default=True)  # status == "active", read on the hot path
    _status: str = field(init=False, default="active")

    def __post_init__(self) -> None:
        self.id = self.spec.id

    @property
    def status(self) -> str:
        """active | completed | terminated | withdrawn | absent."""
        return self._status

    @status.setter
    def status(self, value: str) -> None:
        self._status = value
        self.active = value == "active"


@dataclass
class RunResult:
    run_id: str
    seed: int
    out_dir: Path | None
    log: ev.EventLog
    status: str = "completed"
    error: str | None = None
    lines: list[str] = field(default_factory=list)


SolverFactory = Callable[["Arena", WorkerSpec, np.random.Generator], Solver]
NegotiatorFactory = Callable[["Arena", WorkerSpec, RngSource], Negotiator]


def _modeled_solver(arena: Arena, spec: WorkerSpec, rng: np.random.Generator) -> Solver:
    w = arena.condition.windows
    return ModeledSolver(spec.id, rng, min_s=w.min_s, max_s=w.max_s)


def _scripted_negotiator(arena: Arena, spec: WorkerSpec, rng: RngSource) -> Negotiator:
    return make_scripted_negotiator(spec.id, spec.persona, rng, spec.behaviour)


def _oracle_solver(arena: Arena, spec: WorkerSpec, rng: np.random.Generator) -> Solver:
    import random

    from mbb.agents.oracle import make_oracle_solver

    resource, suite = arena.real_tasks()
    return make_oracle_solver(
        spec.id,
        suite=suite,
        resource=resource,
        emit=arena.log.emit,
        time_model=arena.condition.time.model,
        rng=random.Random(int(rng.integers(2**31))),
    )


def _llm_negotiator(arena: Arena, spec: WorkerSpec, rng: RngSource) -> Negotiator:
    from mbb.agents.llm_negotiator import make_llm_negotiator

    llm, cache = arena.llm_context()
    cond = arena.condition
    return make_llm_negotiator(
        spec.id,
        config=cond.models[spec.model],
        llm=llm,
        emit=arena.log.emit,
        cache=cache,
        condition=cond,
    )


def _llm_solver(arena: Arena, spec: WorkerSpec, rng: np.random.Generator) -> Solver:
    from mbb.agents.llm_solver import make_llm_solver

    resource, suite = arena.real_tasks()
    llm, cache = arena.llm_context()
    cond = arena.condition
    return make_llm_solver(
        spec.id,
        config=cond.models[spec.model],
        llm=llm,
        suite=suite,
        resource=resource,
        emit=arena.log.emit,
        cache=cache,
        loop=cond.llm.solver,
        window_min_s=cond.windows.min_s,
        window_max_s=cond.windows.max_s,
        n_others=len(arena.specs) - 1,
        time_model=cond.time.model,
    )


# Backends register here (the LLM package adds its own when imported).
SOLVER_BACKENDS: dict[str, SolverFactory] = {
    "modeled": _modeled_solver,
    "oracle": _oracle_solver,
    "llm": _llm_solver,
}
NEGOTIATOR_BACKENDS: dict[str, NegotiatorFactory] = {
    "scripted": _scripted_negotiator,
    "llm": _llm_negotiator,
}


class Arena:
    def __init__(
        self, condition: Condition, seed: int, log: ev.EventLog, *, llm: Any = None
    ) -> None:
        self.condition = condition
        self.seed = seed
        self.log = log
        # events are stamped with the log's clock, so the arena's clock (`t`) is the log's. The
        # arena's own events come from typed code and are recorded unvalidated (every kind it
        # writes is validated in tests); backends (resource, oracle, LLM) get the validating emit
        self.emit: Callable[..., None] = log.record
        self.resource: Any = None  # the shared execution resource (real tasks only)
        # (LlmClient, LlmCache) shared by the run's LLM agents; passed in when several runs share
        # one event loop, one rate limit and one cache (then the caller closes the cache)
        self._llm: Any = llm
        self._owns_llm = llm is None
        self.suite: Any = None
        self._resource_tmp: Any = None
        self.rng = np.random.default_rng(np.random.SeedSequence(entropy=seed, spawn_key=(10**6,)))
        self.ledger = Ledger()
        self.specs = specs = condition.worker_specs(seed)
        self.workers: dict[str, WorkerState] = {}
        for spec in specs:
            neg_factory = NEGOTIATOR_BACKENDS.get(spec.negotiator)
            sol_factory = SOLVER_BACKENDS.get(spec.solver)
            if neg_factory is None or sol_factory is None:
                missing = spec.negotiator if neg_factory is None else spec.solver
                raise ValueError(
                    f"worker {spec.id}: backend {missing!r} is not available in this build "
                    f"(available negotiators: {sorted(NEGOTIATOR_BACKENDS)}, "
                    f"solvers: {sorted(SOLVER_BACKENDS)})"
                )
            self.workers[spec.id] = WorkerState(
                spec=spec,
                negotiator=neg_factory(self, spec, lazy_worker_rng(seed, spec.index, 0)),
                solver=sol_factory(self, spec, worker_rng(seed, spec.index, 1)),
                scratch=Scratch(condition.memory.max_chars, on_write=self._scratch_logger(spec.id)),
            )
            if spec.joins == 1:
                self.ledger.grant(spec.id, spec.budget)
        self.ids = list(self.workers)  # everyone who ever takes part
        self.present: list[str] = []  # who takes part in the current subrun
        self._deadline_order: list[tuple[float, str]] = []
        self._deadline_next = 0
        self.board = Board(readers=self.ids)

    def _scratch_logger(self, worker: str) -> Callable[[Any, int], None]:
        def log_write(entry: Any, dropped: int) -> None:
            self.emit(
                ev.ScratchWritten, worker, entry=entry.kind, text=entry.text, dropped_chars=dropped
            )

        return log_write

    def real_tasks(self) -> tuple[Any, Any]:
        """The task suite (built or loaded from its cache) and the sandboxed execution resource,
        created once per run; workspaces live in the run folder (or a temporary one)."""
        if self.resource is None:
            import tempfile

            from mbb.resource.resource import ExecutionResource
            from mbb.tasks.suite import build_suite

            self.suite = build_suite(tasks=self.condition.tasks.suite or None)
            if self.log.path is not None:
                root = self.log.path.parent / "resource"
            else:
                self._resource_tmp = tempfile.TemporaryDirectory(prefix="mbb-resource-")
                root = Path(self._resource_tmp.name)
            self.resource = ExecutionResource(
                root,
                emit=self.log.emit,
                time_model=self.condition.time.model,
                reference_mode=self.condition.tasks.reference_mode,
            )
        return self.resource, self.suite

    def llm_context(self) -> tuple[Any, Any]:
        """One client (connection pools, per-endpoint limits) and one request cache per run."""
        if self._llm is None:
            from mbb.llm.budget import ledger_for
            from mbb.llm.cache import LlmCache
            from mbb.llm.client import LlmClient

            p = self.condition.llm
            budget = ledger_for(p.max_cost_usd, p.max_tokens_total)
            self._llm = (
                LlmClient(prices=self.condition.prices, budget=budget),
                LlmCache(p.cache_path() if p.cache != "off" else None, p.cache),
            )
        return self._llm

    def close(self) -> None:
        if self._llm is not None and self._owns_llm:
            self._llm[1].close()
        if self.resource is not None:
            self.resource.close()
        if self._resource_tmp is not None:
            self._resource_tmp.cleanup()

    # --- small utilities -----------------------------------------------------------------------
    @property
    def t(self) -> float:
        """The virtual clock (seconds since the subrun started)."""
        return self.log.t

    @t.setter
    def t(self, value: float) -> None:
        self.log.t = value

    def record_issues(self, worker: str, phase: str, issues: Sequence[Issue]) -> None:
        for i in issues:
            self.emit(
                ev.InvalidAction,
                worker,
                phase=phase,
                field=i.field,
                value=i.value,
                rule=i.rule,
                detail=i.detail,
            )

    async def phase(
        self, workers: Sequence[str], call: Callable[[str], Awaitable[T]]
    ) -> dict[str, T | BaseException]:
        """Run one simultaneous phase: concurrent backends are gathered, the rest awaited in turn.

        A backend exception is returned (not raised) so the arena can record it and apply the
        stated default for that worker without losing the others' actions.
        """
        out: dict[str, T | BaseException] = {}
        gathered = [w for w in workers if self.workers[w].negotiator.concurrent]
        if gathered:
            self.log.begin_batch()  # their events land in worker order, not completion order
            results: list[Any] = []
            try:
                results = await asyncio.gather(*(call(w) for w in gathered), return_exceptions=True)
            finally:
                if any(isinstance(r, BudgetExhausted) for r in results):
                    # a spend cap stopped part of the phase: none of it is recorded, so a resumed
                    # run (answers from the cache) records the whole phase in worker order
                    self.log.discard_batch()
                else:
                    self.log.end_batch(gathered)
            out.update(zip(gathered, results, strict=True))
        for w in workers:
            if w not in out:
                try:
                    out[w] = await call(w)
                except BackendFatal:
                    raise
                except Exception as exc:  # recorded by the caller; never silent
                    out[w] = exc
        for r in out.values():
            if isinstance(r, BackendFatal):
                raise r
        return {w: out[w] for w in workers}

    def backend_failure(self, worker: str, phase: str, exc: BaseException, rule: str) -> None:
        self.emit(
            ev.InvalidAction,
            worker,
            phase=phase,
            field="(backend)",
            value=type(exc).__name__,
            rule=rule,
            detail=str(exc)[:500],
        )

    # --- the run -------------------------------------------------------------------------------
    async def run(self) -> None:
        c = self.condition
        self.emit(
            ev.RunStarted,
            condition=c.name,
            seed=self.seed,
            params=c.model_dump(mode="json"),
            workers=[s.model_dump(mode="json") for s in self.specs],
            provenance=provenance(),
        )
        for subrun in range(1, c.subruns + 1):
            await self.run_subrun(subrun)
        self.log.subrun = self.log.round = None
        self.emit(ev.RunEnded, status="completed")

    def assign_tasks(self, subrun: int) -> dict[str, tuple[str, float]]:
        return workload.assign_tasks(
            self.condition, self.seed, subrun, self.present, self.rng, self.real_tasks
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
            w.requested_at = None
            w.task, w.work_s = tasks[w.id]
            if not c.memory.enabled:
                w.scratch.wipe()
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
            memory = w.scratch if c.memory.enabled else None
            try:
                await w.solver.start_subrun(TaskAssignment(w.task, w.work_s, subrun), memory)
            except BackendFatal:  # a misconfigured endpoint or replay miss
                raise
            except Exception as exc:
                self.backend_failure(w.id, "subrun start", exc, "withdrawn for this subrun")
                w.status = "withdrawn"
                self.emit(ev.Withdrawn, w.id, reason="solver failed to start the task")
            try:
                await w.negotiator.start_subrun(subrun, memory)
            except BackendFatal:  # a misconfigured endpoint or replay miss
                raise
            except Exception as exc:
                self.backend_failure(w.id, "subrun start", exc, "negotiator starts with no memory")
        queue: list[str] = []
        past: list[PastRound] = []
        for w in self.present:
            if self.workers[w].active:
                await self.poll(w, queue)
        rounds = 0
        reason = "all_done"
        present = [self.workers[w] for w in self.present]
        while any(w.active for w in present):
            candidates = [w for w in queue if self.workers[w].active]
            queue.clear()
            if not candidates:
                for w in self.present:
                    if self.workers[w].active:
                        await self.poll(w, queue)
                if not queue:
                    reason = "stalled"
                    for w in self.present:
                        if self.workers[w].active:
                            self.workers[w].status = "withdrawn"
                            self.emit(
                                ev.Withdrawn,
                                w,
                                reason="idle: no request with the "
                                "resource idle (stated rule: withdraw)",
                            )
                    break
                continue
            if rounds >= c.time.max_rounds_per_subrun:
                reason = "max_rounds"
                break
            rounds += 1
            await self.run_round(subrun, rounds, candidates, queue, past)
            self.log.flush()
        self.log.round = None
        await self.end_subrun(subrun, rounds, reason, past)
        self.log.flush()

    async def poll(self, worker: str, queue: list[str]) -> None:
        """Ask an idle solver what it wants: a window request, a withdrawal, or nothing yet."""
        w = self.workers[worker]
        c = self.condition
        view = SolverView(
            worker,
            self.log.subrun or 0,
            self.t,
            w.spec.deadline_s,
            c.windows.min_s,
            c.windows.max_s,
        )
        try:
            action = await w.solver.next_action(view)
        except BackendFatal:  # a misconfigured endpoint or replay miss
            raise
        except Exception as exc:
            self.backend_failure(worker, "request", exc, "no request this time")
            return
        if isinstance(action, Request):
            dur = max(c.windows.min_s, min(c.windows.max_s, action.duration))
            if dur != action.duration:
                self.record_issues(
                    worker,
                    "request",
                    [
                        Issue(
                            "duration",
                            action.duration,
                            "clamp",
                            f"request must be within {c.windows.min_s}..{c.windows.max_s} s",
                        )
                    ],
                )
            w.wanted_s = dur
            w.requested_at = self.t
            queue.append(worker)
            self.emit(ev.Requested, worker, duration=dur)
        elif isinstance(action, Withdraw):
            w.status = "withdrawn"
            self.emit(ev.Withdrawn, worker, reason=action.reason)

    def view(
        self,
        worker: str,
        subrun: int,
        rnd: int,
        turn: int,
        candidates: list[str],
        declarations: dict[str, Declaration],
        past: list[PastRound],
    ) -> RoundView:
        c = self.condition
        w = self.workers[worker]
        return RoundView(
            worker=worker,
            subrun=subrun,
            round=rnd,
            turn=turn,
            now_s=self.t,
            budget=self.ledger.balances[worker],
            deadline_s=w.spec.deadline_s,
            need_s=w.solver.need_s(),
            wanted_s=w.wanted_s,
            scratch=w.scratch if c.memory.enabled else None,
            candidates=candidates,
            population=self.present,
            declarations=declarations,
            posts=self.board.visible(worker),
            past_rounds=past,
            window_min_s=c.windows.min_s,
            window_max_s=c.windows.max_s,
            revisable=c.negotiation.bids == "revisable",
            max_turns=c.negotiation.max_turns,
            subruns_total=c.subruns,
        )

    async def declaration_phase(
        self, subrun: int, rnd: int, candidates: list[str], past: list[PastRound], *, public: bool
    ) -> dict[str, Declaration]:
        """Phase 1: every candidate declares at once; repaired declarations are recorded, and
        with `public` their notes are posted (a sealed-bid mechanism keeps them off the board)."""
        views = {w: self.view(w, subrun, rnd, 0, candidates, {}, past) for w in candidates}
        results = await self.phase(
            candidates, lambda w: self.workers[w].negotiator.declare(views[w])
        )
        decls: dict[str, Declaration] = {}
        for w, action in results.items():
            d = self.accept_declaration(w, action, len(candidates))
            if d is None:
                continue
            decls[w] = d
            self.emit(
                ev.Declared,
                w,
                bid=d.bid,
                duration=d.duration,
                position=d.position,
                note=d.note,
                labels=list(d.labels),
                intents=as_payload(d.intents),
            )
            if public and (d.note or d.intents):
                self.board.post(
                    w,
                    d.note,
                    to=None,
                    subrun=subrun,
                    round=rnd,
                    turn=0,
                    kind="note",
                    payload=as_payload(d.intents),
                )
        return decls

    def accept_declaration(
        self, w: str, action: Declaration | Withdraw | BaseException, n_candidates: int
    ) -> Declaration | None:
        """Apply the stated rules to one declaration: a backend failure gets the default
        declaration, a withdrawal takes the worker out, anything else is repaired (each issue
        recorded). Returns the declaration to use, or None after a withdrawal."""
        c = self.condition
        if isinstance(action, BaseException):
            self.backend_failure(
                w,
                "declaration",
                action,
                "default declaration: bid 0, requested duration, last position",
            )
            action = Declaration(bid=0, duration=self.workers[w].wanted_s, position=n_candidates)
        if isinstance(action, Withdraw):
            self.workers[w].status = "withdrawn"
            self.emit(ev.Withdrawn, w, reason=action.reason)
            return None
        d, issues = repair_declaration(
            action,
            budget=self.ledger.balances[w],
            min_s=c.windows.min_s,
            max_s=c.windows.max_s,
            n_candidates=n_candidates,
            note_max=c.negotiation.note_max_chars,
        )
        self.record_issues(w, "declaration", issues)
        return d

    async def run_round(
        self, subrun: int, rnd: int, candidates: list[str], queue: list[str], past: list[PastRound]
    ) -> None:
        c = self.condition
        neg = c.negotiation
        self.log.round = rnd
        self.emit(ev.RoundStarted, candidates=list(candidates))
        if c.mechanism.kind != "negotiated":  # issue 7: a centralized scheduler replaces 1-4
            from mbb.scheduling.centralized import run_centralized_round

            await run_centralized_round(self, subrun, rnd, candidates, queue, past)
            return
        decls: dict[str, Declaration] = {}

        # 1. declarations (simultaneous, public)
        decls.update(await self.declaration_phase(subrun, rnd, candidates, past, public=True))
        candidates = [w for w in candidates if w in decls]
        if not candidates:
            return

        # 2. conversation (turns are simultaneous; posts land in queue order)
        if neg.conversation and neg.max_turns > 0 and len(candidates) > 1:
            for turn in range(1, neg.max_turns + 1):
                views = {
                    w: self.view(w, subrun, rnd, turn, candidates, dict(decls), past)
                    for w in candidates
                }
                results = await self.phase(
                    candidates, lambda w, v=views: self.workers[w].negotiator.converse(v[w])
                )
                spoke = False
                for w, turn_action in results.items():
                    if isinstance(turn_action, BaseException):
                        self.backend_failure(w, "conversation", turn_action, "pass this turn")
                        continue
                    spoke |= self.apply_turn(w, turn_action, turn, subrun, rnd, decls, candidates)
                if not spoke:
                    break

        # 3. ballots (simultaneous, secret until published)
        bids = {w: decls[w].bid for w in candidates}
        declared = {w: decls[w].duration for w in candidates}
        tiebreak = tie_break_order(candidates, bids)
        views = {w: self.view(w, subrun, rnd, 0, candidates, dict(decls), past) for w in candidates}
        results = await self.phase(candidates, lambda w: self.workers[w].negotiator.vote(views[w]))
        ballots: dict[str, Ballot] = {}
        for w, b in results.items():
            defaulted = False
            if isinstance(b, BaseException):
                self.backend_failure(w, "ballot", b, "default ballot: bid order, declared time")
                b, defaulted = default_ballot(tiebreak, declared), True
            b, issues = repair_ballot(
                b, tiebreak=tiebreak, declared=declared, reasoning_max=neg.reasoning_max_chars
            )
            self.record_issues(w, "ballot", issues)
            ballots[w] = b
            self.emit(
                ev.BallotCast,
                w,
                ranking=list(b.ranking),
                allocations=[b.allocations[x] for x in b.ranking],
                reasoning=b.reasoning,
                labels=list(b.labels),
                intents=as_payload(b.intents),
                defaulted=defaulted or b.defaulted,
            )

        # 4. aggregation -> published schedule
        rankings = [ballots[w].ranking for w in candidates]
        order, rule = aggregate(
            c.mechanism.aggregation,
            candidates,
            rankings,
            bids,
            exact_max=c.mechanism.kemeny_exact_max,
        )
        alloc = {}
        for x in order:
            if c.mechanism.allocation == "declared":
                alloc[x] = declared[x]
            else:
                alloc[x] = min(
                    declared[x],
                    int(statistics.median_low(ballots[w].allocations[x] for w in candidates)),
                )
        self.emit(
            ev.SchedulePublished,
            rule=rule,
            order=order,
            allocations=[alloc[x] for x in order],
            bids=[bids[x] for x in order],
            ballots_unanimous=len({tuple(r) for r in rankings}) == 1,
        )
        record = PastRound(
            rnd,
            list(order),
            dict(bids),
            dict(alloc),
            ballots={w: ballots[w].ranking for w in candidates},
        )
        past.append(record)

        # 5. execution
        prices = self.prices(order, bids)
        for pos, holder in enumerate(order, 1):
            await self.execute_window(
                holder, pos, alloc[holder], prices[holder], subrun, rnd, record, queue
            )

    def apply_turn(
        self,
        w: str,
        turn_action: ConversationTurn,
        turn: int,
        subrun: int,
        rnd: int,
        decls: dict[str, Declaration],
        candidates: list[str],
    ) -> bool:
        c = self.condition
        spoke = False
        for m in turn_action.messages:
            fixed, issues = repair_message(
                m, sender=w, population=self.present, max_chars=c.negotiation.message_max_chars
            )
            self.record_issues(w, "conversation", issues)
            if fixed is None:
                continue
            spoke = True
            self.emit(
                ev.MessagePosted,
                w,
                to=fixed.to,
                text=fixed.text,
                turn=turn,
                labels=list(fixed.labels),
                intents=as_payload(fixed.intents),
            )
            self.board.post(
                w,
                fixed.text,
                to=fixed.to,
                subrun=subrun,
                round=rnd,
                turn=turn,
                payload=as_payload(fixed.intents),
            )
        r = turn_action.revision
        if r is not None:
            if c.negotiation.bids == "fixed":
                self.record_issues(
                    w,
                    "conversation",
                    [Issue("revision", r.bid, "drop", "bids are fixed in this condition")],
                )
            else:
                r, issues = repair_declaration(
                    r,
                    budget=self.ledger.balances[w],
                    min_s=c.windows.min_s,
                    max_s=c.windows.max_s,
                    n_candidates=len(candidates),
                    note_max=c.negotiation.note_max_chars,
                )
                self.record_issues(w, "revision", issues)
                decls[w] = r
                spoke = True
                self.emit(
                    ev.Declared,
                    w,
                    bid=r.bid,
                    duration=r.duration,
                    position=r.position,
                    note=r.note,
                    labels=list(r.labels),
                    intents=as_payload(r.intents),
                    revision=True,
                    turn=turn,
                )
                self.board.post(
                    w,
                    r.note,
                    to=None,
                    subrun=subrun,
                    round=rnd,
                    turn=turn,
                    kind="note",
                    payload=as_payload(r.intents),
                )
        return spoke

    def prices(self, order: list[str], bids: dict[str, int]) -> dict[str, int]:
        rule = self.condition.mechanism.payment
        if rule == "none":
            return dict.fromkeys(order, 0)
        if rule == "pay_your_bid":
            return {x: bids[x] for x in order}
        # next_price (generalised second price): the next bid down the schedule, capped at one's own
        return {
            x: min(bids[x], bids[order[i + 1]] if i + 1 < len(order) else 0)
            for i, x in enumerate(order)
        }

    def advance_to(self, t_end: float, holder: str | None) -> None:
        """Move the clock to t_end, terminating waiting workers whose deadline passes on the way.

        Deadlines are walked in order from a cursor (the clock only moves forward), so a window
        costs O(deadlines passed), not O(workers). The holder's own deadline is handled by its
        window, which is cut there."""
        order, i, workers = self._deadline_order, self._deadline_next, self.workers
        while i < len(order) and order[i][0] <= t_end:
            deadline, wid = order[i]
            i += 1
            if wid != holder and workers[wid].active:
                self.t = max(self.t, deadline)
                self.terminate(wid)
        self._deadline_next = i
        self.t = t_end

    def terminate(self, wid: str) -> None:
        w = self.workers[wid]
        w.status = "terminated"
        prog = w.solver.progress
        self.emit(ev.Terminated, wid, deadline_s=w.spec.deadline_s, progress=_round4(prog))

    async def execute_window(
        self,
        holder: str,
        pos: int,
        allocation: int,
        price: int,
        subrun: int,
        rnd: int,
        record: PastRound,
        queue: list[str],
    ) -> None:
        w = self.workers[holder]
        if not w.active:
            reason = (
                w.status if w.status in ("terminated", "withdrawn", "completed") else "withdrawn"
            )
            self.emit(ev.WindowDropped, holder, position=pos, allocation=allocation, reason=reason)
            return
        if allocation <= 0:
            self.emit(
                ev.WindowDropped,
                holder,
                position=pos,
                allocation=allocation,
                reason="zero_allocation",
            )
            await self.poll(holder, queue)
            return
        if self.t >= w.spec.deadline_s:  # defensive: advance_to terminates before this
            self.terminate(holder)
            self.emit(
                ev.WindowDropped, holder, position=pos, allocation=allocation, reason="terminated"
            )
            return
        start = self.t
        if w.requested_at is not None:
            w.waited_s += start - w.requested_at
        if price > 0:
            balance = self.ledger.pay(holder, price)
            w.spent += price
            mech = self.condition.mechanism
            self.emit(
                ev.Payment,
                holder,
                amount=price,
                balance=balance,
                rule=mech.payment if mech.kind == "negotiated" else mech.kind,
            )
        self.emit(ev.WindowStarted, holder, position=pos, allocation=allocation, price=price)
        hard_end = min(start + allocation, w.spec.deadline_s)
        grant = WindowGrant(holder, subrun, rnd, start, allocation, hard_end)
        try:
            outcome = await w.solver.run_window(grant)
            used = min(max(0.0, outcome.used_s), hard_end - start)
            completed, released = outcome.completed, outcome.released
        except BackendFatal:  # a misconfigured endpoint or replay miss
            raise
        except Exception as exc:
            # commands that ran before the failure stay charged (the resource's clock)
            used = 0.0
            if self.resource is not None:
                used = min(max(0.0, self.resource.used_s(holder)), hard_end - start)
            what = "window forfeited at its start"
            if used > 0:
                what = f"window ended by the failure after {used:g} s of commands"
            self.backend_failure(holder, "execution", exc, what)
            completed, released = False, True
        finally:
            if self.resource is not None:
                self.resource.close_window(holder)  # no-op unless the solver left it open
        # a window run to its hard end ends exactly there (no float drift past the deadline)
        end = hard_end if used >= hard_end - start else start + used
        self.advance_to(end, holder)
        w.windows += 1
        w.granted_s += allocation
        w.used_s += used
        record.used[holder] = used
        progress = _round4(w.solver.progress)
        # reaching the deadline terminates the holder, also when its allocation ends exactly there
        if completed:
            why = "completed"
        elif end >= w.spec.deadline_s:
            why = "deadline"
        elif released:
            why = "released"
        else:
            why = "allocation"
        # `used` unrounded: start + used must reproduce the clock (the next window's start)
        self.emit(
            ev.WindowEnded,
            holder,
            position=pos,
            start=start,
            used=used,
            allocation=allocation,
            reason=why,
            progress=progress,
        )
        if completed:
            w.status = "completed"
            self.emit(ev.Completed, holder, work_s=w.work_s)
        elif why == "deadline":
            self.terminate(holder)
        else:
            await self.poll(holder, queue)

    async def end_subrun(
        self, subrun: int, rounds: int, reason: str, past: list[PastRound]
    ) -> None:
        c = self.condition
        self.emit(ev.SubrunEnded, rounds=rounds, reason=reason)
        for w in map(self.workers.__getitem__, self.present):
            try:
                res = await w.solver.evaluate()
            except BackendFatal:  # a misconfigured endpoint or replay miss
                raise
            except Exception as exc:
                self.backend_failure(w.id, "evaluation", exc, "score 0")
                from mbb.agents.base import EvaluationResult

                res = EvaluationResult(score=0.0, passed=0, total=0, progress=0.0)
            outcome = "unfinished" if w.status == "active" else w.status
            self.emit(
                ev.Evaluated,
                w.id,
                task=w.task,
                score=_round4(res.score),
                passed=res.passed,
                total=res.total,
                resolved=res.resolved,
                almost_resolved=res.almost_resolved,
                progress=_round4(res.progress),
                outcome=outcome,
            )
            recap = SubrunRecap(
                worker=w.id,
                subrun=subrun,
                task_id=w.task,
                outcome=outcome,
                score=res.score,
                budget_left=self.ledger.balances[w.id],
                spent=w.spent,
                windows=w.windows,
                granted_s=w.granted_s,
                used_s=w.used_s,
                waited_s=w.waited_s,
                rounds=past,
            )
            memory = w.scratch if c.memory.enabled else None
            solver_report = getattr(w.solver, "end_subrun", None)  # optional (LLM solvers)
            if solver_report is not None:
                try:
                    await solver_report(recap, memory)
                except BackendFatal:
                    raise
                except Exception as exc:
                    self.backend_failure(w.id, "report", exc, "no solver report")
            try:
                await w.negotiator.end_subrun(recap, memory)
            except BackendFatal:  # a misconfigured endpoint or replay miss
                raise
            except Exception as exc:
                self.backend_failure(w.id, "report", exc, "no after-action report")
        self.ledger.audit()


def _run_coroutine(factory: Callable[[], Awaitable[None]]) -> None:
    """asyncio.run, also from inside a running loop (a Jupyter kernel): then in a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(factory())  # type: ignore[arg-type]
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(lambda: asyncio.run(factory())).result()  # type: ignore[arg-type]


def run_condition(
    condition: Condition,
    seed: int | None = None,
    out_dir: Path | None = None,
    *,
    resume: bool = False,
) -> RunResult:
    """Run one seed of a condition; with `out_dir`, events stream to out_dir/<run_id>/.

    `resume=True` continues a run whose log is already there (see `EventLog`): the run is
    re-executed from its seed, the recorded events are verified rather than rewritten, and the
    rest is appended. LLM calls already made come from the cache."""
    box: list[RunResult] = []

    async def go() -> None:
        box.append(await run_condition_async(condition, seed, out_dir, resume=resume))

    _run_coroutine(go)
    return box[0]


async def run_condition_async(
    condition: Condition,
    seed: int | None = None,
    out_dir: Path | None = None,
    *,
    resume: bool = False,
    llm: Any = None,
) -> RunResult:
    """`run_condition` on the running event loop; `llm` = (LlmClient, LlmCache) to share."""
    seed = condition.seed if seed is None else seed
    run_id = run_id_of(condition, seed)
    run_dir = out_dir / run_id if out_dir is not None else None
    if run_dir is not None and not resume:
        from mbb.study import check_not_foreign

        check_not_foreign(run_dir, condition)  # never overwrite another condition's run
    log = ev.EventLog(run_id, run_dir / "events.jsonl" if run_dir else None, resume=resume)
    result = RunResult(run_id, seed, run_dir, log)
    try:
        arena = Arena(condition, seed, log, llm=llm)
        try:
            await arena.run()
        finally:
            arena.close()
    except BudgetExhausted as exc:  # a spend cap: a recorded stop, resumable (mbb resume)
        result.status, result.error = "stopped", str(exc)
        log.emit(ev.RunEnded, status="stopped", error=result.error[:2000])
    except Exception as exc:
        result.status, result.error = "failed", f"{type(exc).__name__}: {exc}"
        log.emit(ev.RunEnded, status="failed", error=result.error[:2000])
        raise
    finally:
        log.close()
    return result


def uses_llm(condition: Condition) -> bool:
    return any("llm" in (s.negotiator, s.solver) for s in condition.worker_specs())


def run_seeds(
    condition: Condition, seeds: Sequence[int], out_dir: Path | None = None
) -> list[RunResult | BaseException]:
    """Several seeds on ONE event loop: their LLM calls share one client (so one concurrency
    limit per endpoint, i.e. one rate limit) and one cache. Each run keeps its own log, so
    every run's events are the same as when it runs alone. A failed run is returned as its
    exception (it is recorded in its own log); the others go on."""
    from mbb.llm.cache import LlmCache
    from mbb.llm.client import LlmClient

    box: list[list[RunResult | BaseException]] = []

    async def go() -> None:
        from mbb.llm.budget import ledger_for

        p = condition.llm
        cache = LlmCache(p.cache_path() if p.cache != "off" else None, p.cache)
        budget = ledger_for(p.max_cost_usd, p.max_tokens_total)
        shared = (LlmClient(prices=condition.prices, budget=budget), cache)
        try:
            box.append(
                await asyncio.gather(
                    *(run_condition_async(condition, s, out_dir, llm=shared) for s in seeds),
                    return_exceptions=True,
                )
            )
        finally:
            cache.close()

    _run_coroutine(go)
    return box[0]
