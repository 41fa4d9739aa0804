"""The arena: runs one condition (N workers x S subruns) exactly per the protocol.

Time is a virtual clock in seconds since the subrun started. It advances only while an
execution window runs; the negotiation phases take no simulated time. Waiting in the queue
therefore costs deadline time, negotiating does not. A round starts when the resource is idle
and the queue is not empty. The condition's mechanism (`mbb.protocol.mechanisms`: the
negotiated phases of `mbb.protocol.phases`, or a centralized scheduler) decides its schedule;
the arena publishes it and runs the windows one after another, on one path for every
mechanism. The holder pays when its window starts; a window ends at its allocation, at its
holder's deadline (hard cut-off), or as soon as the holder finishes or releases. A worker whose
deadline passes is terminated for the subrun. Rules come from `mbb.protocol.rules`, agent
backends from `mbb.protocol.backends`; every agent call is guarded (`Arena.guarded`).
"""

from __future__ import annotations

import asyncio
import functools
import signal
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np

from mbb.core import events as ev
from mbb.core.actions import Declaration, Request, Withdraw
from mbb.core.agent_api import (
    BackendFatal,
    Negotiator,
    PastRound,
    RoundView,
    Solver,
    SolverView,
    TaskAssignment,
)
from mbb.core.provenance import provenance
from mbb.llm.budget import BudgetExhausted
from mbb.params import Condition, WorkerSpec
from mbb.protocol import phases
from mbb.protocol.backends import (
    NEGOTIATOR_BACKENDS,
    SOLVER_BACKENDS,
    NegotiatorFactory,
    RngSource,
    SolverFactory,
)
from mbb.protocol.board import Board
from mbb.protocol.explain import plan_of
from mbb.protocol.phases import FAILED, Failed, Round, round4
from mbb.protocol.rules import MECHANISMS
from mbb.protocol.scheduling.ledger import Ledger
from mbb.protocol.scheduling.validation import Issue
from mbb.protocol.scratch import Scratch
from mbb.tasks import workload

__all__ = [
    "NEGOTIATOR_BACKENDS",
    "SOLVER_BACKENDS",
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


_REPORTS = frozenset({"report"})  # scratch kinds that are after-action reports


def worker_rng(seed: int, index: int, role: int) -> np.random.Generator:
    """Independent stream per (run seed, worker index, role); role 0 negotiator, 1 solver."""
    return np.random.default_rng(np.random.SeedSequence(entropy=seed, spawn_key=(index, role)))


def lazy_worker_rng(seed: int, index: int, role: int) -> RngSource:
    """`worker_rng`, seeded on the first call: seeding costs ~15 µs, and a negotiator under a
    centralized scheduler without bids never draws."""
    return functools.cache(functools.partial(worker_rng, seed, index, role))


def run_id_for(condition: str, seed: int, model: str | None = None) -> str:
    """`<condition>-seedNNNN`; with LLM workers `<condition>-<model>-seedNNNN` (mbb.batch.study)."""
    if model:
        return f"{condition}-{model}-seed{seed:04d}"
    return f"{condition}-seed{seed:04d}"


def run_id_of(condition: Condition, seed: int) -> str:
    from mbb.batch.study import model_label

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


class Arena:
    """Runs one seed of a condition: subruns of rounds, each round's schedule decided by the
    condition's mechanism (`mbb.protocol.mechanisms`) and published, paid and executed here.

    `llm`: (LlmClient, LlmCache) shared with other runs; `negotiators` / `solvers`: backend
    factories by name (default: the registered ones, `mbb.protocol.backends`)."""

    def __init__(
        self,
        condition: Condition,
        seed: int,
        log: ev.EventLog,
        *,
        llm: Any = None,
        negotiators: Mapping[str, NegotiatorFactory] | None = None,
        solvers: Mapping[str, SolverFactory] | None = None,
    ) -> None:
        self.condition = condition
        self.plan = plan_of(condition)  # the phases that run (the explanation reads the same)
        self.mechanism = MECHANISMS[condition.mechanism.kind].implementation()
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
        negotiators = NEGOTIATOR_BACKENDS if negotiators is None else negotiators
        solvers = SOLVER_BACKENDS if solvers is None else solvers
        for spec in specs:
            neg_factory = negotiators.get(spec.negotiator)
            sol_factory = solvers.get(spec.solver)
            if neg_factory is None or sol_factory is None:
                missing = spec.negotiator if neg_factory is None else spec.solver
                raise ValueError(
                    f"worker {spec.id}: backend {missing!r} is not available in this build "
                    f"(available negotiators: {sorted(negotiators)}, "
                    f"solvers: {sorted(solvers)})"
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
                # a registered time model (mbb.protocol.rules.TIME_MODELS); the resource charges
                # commands by virtual or measured time ("charged" adds the solver's own time)
                time_model=self.condition.time.model,  # type: ignore[arg-type]
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

    async def guarded(
        self,
        worker: str,
        phase: str,
        rule: str | Callable[[BaseException], str],
        call: Awaitable[T],
    ) -> T | Literal[Failed.FAILED]:
        """Await one agent call. A failure is recorded (`invalid_action` naming the stated
        `rule`, or `rule(exc)`) and returned as FAILED, so the caller applies that rule; a
        `BackendFatal` (misconfigured endpoint, replay miss) stops the run."""
        try:
            return await call
        except BackendFatal:
            raise
        except Exception as exc:  # recorded; never silent
            self.backend_failure(worker, phase, exc, rule if isinstance(rule, str) else rule(exc))
            return FAILED

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

    def memory_of(self, w: WorkerState) -> Scratch | None:
        """What a worker's agents read and write across subruns (None: nothing carries over)."""
        return w.scratch if self.plan.memory or self.plan.reports else None

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
        action = await self.guarded(
            worker, "request", "no request this time", w.solver.next_action(view)
        )
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

    def round_view(
        self, worker: str, rnd: Round, turn: int, declarations: dict[str, Declaration]
    ) -> RoundView:
        """What `worker`'s negotiator sees in this round at conversation turn `turn` (0 outside
        the conversation), given the declarations made so far."""
        c = self.condition
        w = self.workers[worker]
        return RoundView(
            worker=worker,
            subrun=rnd.subrun,
            round=rnd.number,
            turn=turn,
            now_s=self.t,
            budget=self.ledger.balances[worker],
            deadline_s=w.spec.deadline_s,
            need_s=w.solver.need_s(),
            wanted_s=w.wanted_s,
            scratch=self.memory_of(w),
            candidates=rnd.candidates,
            population=self.present,
            declarations=declarations,
            posts=self.board.visible(worker),
            past_rounds=rnd.past,
            window_min_s=c.windows.min_s,
            window_max_s=c.windows.max_s,
            revisable=self.plan.revisable,
            max_turns=c.negotiation.max_turns,
            subruns_total=c.subruns,
        )

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
        self.emit(ev.Terminated, wid, deadline_s=w.spec.deadline_s, progress=round4(prog))


def _new_loop_deferring_sigint() -> asyncio.AbstractEventLoop:
    """An event loop built with SIGINT held back (main thread only): a Ctrl-C that lands inside
    the loop's constructor leaves a half-built loop whose finaliser prints a traceback. The
    signal is delivered as soon as the loop exists, and the runner handles it from there."""
    if threading.current_thread() is not threading.main_thread():
        return asyncio.new_event_loop()
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        loop = asyncio.new_event_loop()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a held Ctrl-C is raised about here
        return loop
    except BaseException:
        loop.close()
        raise


def _run_to_end(factory: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run the coroutine `factory` makes on a fresh loop, closed whatever happens (a Ctrl-C
    included: asyncio.Runner cancels the task, and a coroutine never started is closed, so
    neither a loop nor a coroutine is left for the garbage collector to complain about)."""
    with asyncio.Runner(loop_factory=_new_loop_deferring_sigint) as runner:
        coro = None
        try:
            coro = factory()
            runner.run(coro)
        except BaseException:
            if coro is not None:
                coro.close()
            raise


def run_coroutine(factory: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run the coroutine `factory` makes to its end, also from inside a running loop (a Jupyter
    kernel): then in a helper thread. factory: makes the coroutine (called once)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        _run_to_end(factory)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(_run_to_end, factory).result()


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

    run_coroutine(go)
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
        from mbb.batch.study import check_not_foreign

        check_not_foreign(run_dir, condition)  # never overwrite another condition's run
    log = ev.EventLog(run_id, run_dir / "events.jsonl" if run_dir else None, resume=resume)
    result = RunResult(run_id, seed, run_dir, log)
    try:
        arena = Arena(condition, seed, log, llm=llm)
        try:
            await arena.run()
        finally:
            if arena._owns_llm and arena._llm is not None:
                await arena._llm[0].aclose()  # the run's endpoint connections
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
            await shared[0].aclose()
            cache.close()

    run_coroutine(go)
    return box[0]
