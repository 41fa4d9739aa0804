"""The narrow interfaces between the arena and any agent backend (scripted, oracle, LLM).

A worker is a negotiator plus a solver sharing an id, a budget and a scratch memory. The arena
only ever hands an agent a *view*: its own private state plus what is public or addressed to it.
All methods are coroutines so backends that do I/O (LLMs) run concurrently within a phase; the
arena awaits non-concurrent backends one by one, which costs no event-loop round-trip.

The small records passed at every call (task, views, grants, outcomes, results, recaps) are
slotted but not frozen: each is built fresh for one call and never read back by its builder,
and a frozen dataclass costs twice as much to build (a 100-worker run builds thousands).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from mbb.core.actions import Ballot, ConversationTurn, Declaration, Request, Withdraw
from mbb.core.errors import BackendFatal  # re-exported: it lives with the other shared errors

if TYPE_CHECKING:
    from mbb.core.board import Post
    from mbb.core.scratch import Scratch

__all__ = [
    "BackendFatal",
    "EvaluationResult",
    "Negotiator",
    "PastRound",
    "RoundView",
    "Solver",
    "SolverView",
    "SubrunRecap",
    "TaskAssignment",
    "WindowGrant",
    "WindowOutcome",
]


@dataclass(slots=True)
class TaskAssignment:
    task_id: str
    work_s: float  # execution seconds the task needs (modeled solver); 0 if unknown (real tasks)
    subrun: int


@dataclass(slots=True)
class PastRound:
    """A finished round of this subrun, as everyone saw it once published."""

    round: int
    order: list[str]
    bids: dict[str, int]  # the public bids: every candidate's if posted, else the holders'
    allocations: dict[str, int]
    used: dict[str, float] = field(default_factory=dict)  # filled as windows end
    ballots: dict[str, tuple[str, ...]] = field(default_factory=dict)  # published rankings
    # each ballot's reasoning, published after the round's windows ran (when the condition
    # publishes it: `negotiation.ballot_reasoning`)
    reasoning: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class RoundView:
    """What one negotiator may see during a round (built per worker per phase)."""

    worker: str
    subrun: int
    round: int
    turn: int  # conversation turn (0 outside conversation)
    now_s: float
    # private to this worker
    budget: int
    deadline_s: float
    need_s: float  # the solver's estimate of execution seconds still needed
    wanted_s: int  # duration the solver asked for
    scratch: Scratch | None
    # public
    candidates: list[str]  # queue order
    population: list[str]
    declarations: dict[str, Declaration]
    posts: Sequence[Post]  # visible to this worker, this subrun, in order (read-only)
    past_rounds: list[PastRound]
    window_min_s: int
    window_max_s: int
    revisable: bool
    max_turns: int
    subruns_total: int

    @property
    def time_left_s(self) -> float:
        return self.deadline_s - self.now_s

    @property
    def peers(self) -> list[str]:
        return [c for c in self.candidates if c != self.worker]


@dataclass(slots=True)
class SubrunRecap:
    """What a worker learns when a subrun ends (for after-action reports and summaries)."""

    worker: str
    subrun: int
    task_id: str
    outcome: str  # completed | terminated | withdrawn | unfinished
    score: float
    budget_left: int
    spent: int
    windows: int
    granted_s: float
    used_s: float
    waited_s: float
    rounds: list[PastRound]


class Negotiator(Protocol):
    """Decides declarations, conversation turns and ballots for one worker."""

    worker: str
    concurrent: bool  # True: the arena gathers its calls within a phase

    async def start_subrun(self, subrun: int, scratch: Scratch | None) -> None:
        """Reset per-subrun state; `scratch` (None with memory off) is what carries over."""
        ...

    async def declare(self, view: RoundView) -> Declaration | Withdraw: ...

    async def converse(self, view: RoundView) -> ConversationTurn: ...

    async def vote(self, view: RoundView) -> Ballot: ...

    async def end_subrun(self, recap: SubrunRecap, scratch: Scratch | None) -> None: ...


@dataclass(slots=True)
class SolverView:
    worker: str
    subrun: int
    now_s: float
    deadline_s: float
    window_min_s: int
    window_max_s: int


@dataclass(slots=True)
class WindowGrant:
    """An execution window: the solver may use the resource from `start_s` until `hard_end_s`."""

    worker: str
    subrun: int
    round: int
    start_s: float
    allocation_s: int
    hard_end_s: float  # min(start + allocation, holder's deadline): cut off there, mid-command


@dataclass(slots=True)
class WindowOutcome:
    used_s: float  # seconds of the window consumed (≤ hard_end - start); the rest is handed over
    completed: bool  # the task is done (the solver releases at once)
    released: bool  # released early without completing


@dataclass(slots=True)
class EvaluationResult:
    score: float  # passed / total
    passed: int
    total: int
    progress: float  # modeled progress in [0, 1] (real tasks: the score)

    @property
    def resolved(self) -> bool:
        return self.total > 0 and self.passed == self.total

    @property
    def almost_resolved(self) -> bool:
        return self.total > 0 and self.passed >= 0.95 * self.total


@runtime_checkable
class Solver(Protocol):
    """Does the task; only ever executes inside a granted window."""

    worker: str
    concurrent: bool

    async def start_subrun(self, task: TaskAssignment, scratch: Scratch | None) -> None: ...

    def need_s(self) -> float:
        """Execution seconds the solver believes it still needs (private to its worker)."""
        ...

    async def next_action(self, view: SolverView) -> Request | Withdraw | None: ...

    async def run_window(self, grant: WindowGrant) -> WindowOutcome: ...

    async def evaluate(self) -> EvaluationResult: ...

    @property
    def done(self) -> bool: ...

    @property
    def progress(self) -> float:
        """Share of the task done, in [0, 1] (recorded with every window)."""
        ...
