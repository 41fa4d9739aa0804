"""A run's context: its state, and what the phases and mechanisms may do with it.

The state is the condition and its plan (which phases run), the workers with their agents,
scratch memories and this subrun's counters, the ledger, the board, the event log with its
clock, and (on real tasks) the execution resource and the task suite. What may be done with it:
call agents under a guard (`guarded`, or a whole simultaneous phase with `phase`: a failure is
recorded and answered by the stated rule, never silent), record invalid actions, ask an idle
solver what it wants (`poll`), show a negotiator its round (`round_view`), and move the clock
(`advance_to`, which terminates workers whose deadline passes). The arena (`mbb.protocol.arena`)
is this context plus the loop over subruns and rounds; phases and mechanisms take a context,
so they never depend on the arena.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np

from mbb.core import eventlog
from mbb.core import events as ev
from mbb.core.actions import Ballot, Declaration, Request, Withdraw
from mbb.core.agent_api import (
    BackendFatal,
    Negotiator,
    PastRound,
    RoundView,
    Solver,
    SolverView,
)
from mbb.core.board import Board
from mbb.core.errors import RunStopped
from mbb.core.scratch import Scratch
from mbb.core.validity import BACKEND_FIELD
from mbb.params import Condition, WorkerSpec
from mbb.protocol.explain import plan_of
from mbb.protocol.scheduling.ledger import Ledger
from mbb.protocol.scheduling.validation import Issue

__all__ = ["FAILED", "Failed", "Round", "RunContext", "WorkerState", "round4"]

T = TypeVar("T")


class Failed(enum.Enum):
    """What `Arena.guarded` returns for an agent call that failed (and was recorded)."""

    FAILED = "failed"


FAILED = Failed.FAILED


def round4(x: float) -> float:
    """round(x, 4) for a recorded progress or score. Most are 0 or 1, returned as they are:
    round() converts through decimal digits, which costs as much as writing the event."""
    return x if x == 0 or x == 1 else round(x, 4)


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
    thought_s: float = 0.0  # this subrun's solver model time outside windows (charged clock)
    id: str = field(init=False)
    active: bool = field(init=False, default=True)  # status == "active", read on the hot path
    _status: str = field(init=False, default="active")

    def __post_init__(self) -> None:
        self.id = self.spec.id

    @property
    def deadline_s(self) -> float:
        """This subrun's deadline: the private one, minus the solver's model time outside
        windows under the `charged` clock (see the module docstring)."""
        return self.spec.deadline_s - self.thought_s

    @property
    def status(self) -> str:
        """active | completed | terminated | withdrawn | absent."""
        return self._status

    @status.setter
    def status(self, value: str) -> None:
        self._status = value
        self.active = value == "active"


@dataclass(slots=True)
class Round:
    """One round's state, shared by its phases (instead of passing it positionally)."""

    subrun: int
    number: int
    candidates: list[str]  # queue order; narrowed as candidates withdraw
    queue: list[str]  # where requests made during this round's windows land
    past: list[PastRound]  # this subrun's earlier rounds (published)
    declarations: dict[str, Declaration] = field(default_factory=dict)
    ballots: dict[str, Ballot] = field(default_factory=dict)


class RunContext:
    """One seed's state and the operations phases and mechanisms perform on it (see the module
    docstring). `agents`: each worker's (negotiator, solver), keyed by worker id in
    `condition.worker_specs(seed)` order; `resource`: the execution resource of a real-task run
    (its windows are closed and their used time read here); `suite`: the task suite tasks are
    assigned from on real tasks. Nothing given is closed here."""

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
        self.condition = condition
        self.plan = plan_of(condition)  # the phases that run (the explanation reads the same)
        self.seed = seed
        self.log = log
        # events are stamped with the log's clock, so the arena's clock (`t`) is the log's. The
        # arena's own events come from typed code and are recorded unvalidated (every kind it
        # writes is validated in tests); agents (resource, oracle, LLM) get the validating emit
        self.emit: Callable[..., None] = log.record
        self.resource = resource
        self.suite = suite
        self.rng = np.random.default_rng(np.random.SeedSequence(entropy=seed, spawn_key=(10**6,)))
        self.ledger = Ledger()
        self.specs = specs = condition.worker_specs(seed)
        missing = [s.id for s in specs if s.id not in agents]
        if missing:
            raise ValueError(f"no agents given for worker(s) {missing}")
        self.workers: dict[str, WorkerState] = {}
        for spec in specs:
            negotiator, solver = agents[spec.id]
            self.workers[spec.id] = WorkerState(
                spec=spec,
                negotiator=negotiator,
                solver=solver,
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
            completed = False
            try:
                results = await asyncio.gather(*(call(w) for w in gathered), return_exceptions=True)
                completed = True
            finally:
                if not completed or any(isinstance(r, RunStopped) for r in results):
                    # a stop (spend cap, endpoint down) or an interruption (Ctrl-C cancels the
                    # phase) cut it: none of it is recorded, so a resumed run (the finished
                    # calls' answers from the cache) records the whole phase in worker order
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
            field=BACKEND_FIELD,
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
            w.deadline_s,
            c.windows.min_s,
            c.windows.max_s,
        )
        action = await self.guarded(
            worker, "request", "no request this time", w.solver.next_action(view)
        )
        thought = action.thought_s if isinstance(action, Request | Withdraw) else 0.0
        if thought > 0 and self.condition.time.model == "charged":
            self.charge_thinking(w, thought)
            if not w.active:  # its deadline passed while it was thinking
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

    def charge_thinking(self, w: WorkerState, seconds: float) -> None:
        """`charged` clock: `seconds` of `w`'s solver model time outside a window count against
        its deadline (recorded); a deadline that passes by it terminates the worker now."""
        w.thought_s += seconds
        self.emit(ev.ThinkingCharged, w.id, seconds=seconds, deadline_s=w.deadline_s)
        if self.t >= w.deadline_s:
            self.terminate(w.id)
            return
        # its deadline moved earlier: keep the deadlines still ahead in order
        order, i = self._deadline_order, self._deadline_next
        rest = sorted((self.workers[x].deadline_s, x) for _, x in order[i:])
        self._deadline_order = order[:i] + rest

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
            deadline_s=w.deadline_s,
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
        self.emit(ev.Terminated, wid, deadline_s=w.deadline_s, progress=round4(prog))
