"""The events' schema: a typed, versioned record of every state change in a run.

Events are a discriminated union on `kind`; every table and figure is derived from them. `wall`
is the only non-deterministic field. Writing and reading logs of them is `mbb.core.eventlog`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

__all__ = [
    "EVENT_ADAPTER",
    "EVENT_KINDS",
    "SCHEMA_VERSION",
    "Event",
    "EventBase",
    "parse_events",
]

SCHEMA_VERSION = 1


class EventBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str  # first on every line, so a log can be split by kind without parsing it
    v: int = SCHEMA_VERSION
    run_id: str
    seq: int = Field(ge=0, description="Position in the log; strictly increasing.")
    t: float = Field(ge=0, description="Simulated seconds since the subrun started.")
    subrun: int | None = None
    round: int | None = None
    worker: str | None = None
    wall: float = Field(0.0, description="Wall-clock epoch seconds (not deterministic).")


# --- run / subrun lifecycle -------------------------------------------------------------------
class RunStarted(EventBase):
    kind: Literal["run_started"] = "run_started"
    condition: str
    seed: int
    params: dict[str, Any]
    workers: list[dict[str, Any]]
    provenance: dict[str, Any]


class WorkerAtStart(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    worker: str
    task: str
    work_s: float = Field(description="Execution seconds the task needs (modeled solver).")
    budget: int
    deadline_s: float
    scratch_chars: int


class SubrunStarted(EventBase):
    kind: Literal["subrun_started"] = "subrun_started"
    workers: list[WorkerAtStart]


class SubrunEnded(EventBase):
    kind: Literal["subrun_ended"] = "subrun_ended"
    rounds: int
    reason: Literal["all_done", "max_rounds", "stalled"]


class RunEnded(EventBase):
    kind: Literal["run_ended"] = "run_ended"
    status: Literal["completed", "failed", "stopped"]  # stopped: a spend cap (resumable)
    error: str | None = None


# --- queue ------------------------------------------------------------------------------------
class Requested(EventBase):
    kind: Literal["requested"] = "requested"
    duration: int


class Withdrawn(EventBase):
    kind: Literal["withdrawn"] = "withdrawn"
    reason: str


class ThinkingCharged(EventBase):
    """`charged` clock: a solver's own model time outside a window (deciding its next request),
    counted against its worker's deadline."""

    kind: Literal["thinking_charged"] = "thinking_charged"
    seconds: float = Field(ge=0, description="Model time spent outside a window.")
    deadline_s: float = Field(description="The worker's deadline after the charge.")


# --- negotiation ------------------------------------------------------------------------------
class RoundStarted(EventBase):
    kind: Literal["round_started"] = "round_started"
    candidates: list[str] = Field(description="Queue order.")


class Declared(EventBase):
    kind: Literal["declared"] = "declared"
    bid: int
    duration: int
    position: int
    note: str
    labels: list[str] = Field(default_factory=list, description="Ground-truth tactics (scripted).")
    intents: list[dict[str, Any]] = Field(default_factory=list, description="Scripted meaning.")
    revision: bool = False
    turn: int | None = None


class MessagePosted(EventBase):
    kind: Literal["message"] = "message"
    to: str | None = Field(description="Recipient, or None for a public post.")
    text: str
    turn: int
    labels: list[str] = Field(default_factory=list)
    intents: list[dict[str, Any]] = Field(default_factory=list)


class BallotCast(EventBase):
    kind: Literal["ballot"] = "ballot"
    ranking: list[str]
    allocations: list[int] = Field(description="Seconds for each candidate, aligned with ranking.")
    reasoning: str
    labels: list[str] = Field(default_factory=list)
    intents: list[dict[str, Any]] = Field(default_factory=list)
    defaulted: bool = False


class InvalidAction(EventBase):
    kind: Literal["invalid_action"] = "invalid_action"
    phase: str
    field: str
    value: Any
    rule: str = Field(description="The stated handling that was applied (clamp, drop, default...).")
    detail: str


class SchedulePublished(EventBase):
    kind: Literal["schedule_published"] = "schedule_published"
    rule: str = Field(description="Aggregation rule actually applied (after any fallback).")
    order: list[str]
    allocations: list[int] = Field(description="Aligned with order.")
    bids: list[int] = Field(description="Aligned with order.")
    ballots_unanimous: bool


class BallotsPublished(EventBase):
    """After a round's windows ran: the reasoning of these workers' ballots (their `ballot`
    events) became visible to everyone (`negotiation.ballot_reasoning: published`)."""

    kind: Literal["ballots_published"] = "ballots_published"
    workers: list[str]


# --- execution --------------------------------------------------------------------------------
class WindowStarted(EventBase):
    kind: Literal["window_started"] = "window_started"
    position: int
    allocation: int
    price: int


class Payment(EventBase):
    kind: Literal["payment"] = "payment"
    amount: int
    balance: int = Field(description="Balance after the payment.")
    rule: str


class WindowEnded(EventBase):
    kind: Literal["window_ended"] = "window_ended"
    position: int
    start: float
    used: float
    allocation: int
    reason: Literal["completed", "released", "allocation", "deadline"]
    progress: float


class WindowDropped(EventBase):
    kind: Literal["window_dropped"] = "window_dropped"
    position: int
    allocation: int
    reason: Literal["terminated", "withdrawn", "completed", "zero_allocation"]


class Terminated(EventBase):
    kind: Literal["terminated"] = "terminated"
    deadline_s: float
    progress: float


class Completed(EventBase):
    kind: Literal["completed"] = "completed"
    work_s: float


class ScratchWritten(EventBase):
    kind: Literal["scratch_written"] = "scratch_written"
    # solver_report: the solver's after-action report (before it, logs recorded it as `report`)
    entry: Literal["note", "report", "summary", "debt", "rule", "solver_report"]
    text: str
    dropped_chars: int = 0
    accepted: bool = True


class Evaluated(EventBase):
    kind: Literal["evaluation"] = "evaluation"
    task: str
    score: float
    passed: int
    total: int
    resolved: bool
    almost_resolved: bool
    progress: float
    outcome: Literal["completed", "terminated", "withdrawn", "unfinished"]


class CommandRun(EventBase):
    """One command on the shared resource (or refused): what ran, for how long, how it ended."""

    kind: Literal["command"] = "command"
    tool: str = Field(description="bash | read | write | edit | compile | ... (who asked and why).")
    command: str = Field(description="The command line (cut to 2,000 characters).")
    exit_code: int | None = Field(description="None if refused or killed before it exited.")
    runtime: float = Field(description="Seconds charged to the window (modeled or measured).")
    stdout_bytes: int
    stderr_bytes: int
    truncated: bool = Field(description="Output beyond the capture limit was dropped.")
    killed: bool = Field(description="Cut off at the window's hard end (or the wall cap).")
    refused: bool = Field(False, description="Not run: the worker did not hold the resource.")
    reason: str | None = None


class HiddenTestResult(EventBase):
    """One hidden test of an evaluation: expected vs. actual exit code, and stdout match."""

    kind: Literal["test_result"] = "test_result"
    task: str
    test: str
    passed: bool
    exit_code: int | None
    expected_exit: int
    stdout_match: bool
    reason: str | None = None


class LlmCall(EventBase):
    """One LLM request (or cache hit): the token audit is built from these."""

    kind: Literal["llm_call"] = "llm_call"
    role: Literal["negotiator", "solver", "report", "summary", "classifier"]
    phase: str
    model: str
    # None: the endpoint's answer reported no token counts (unknown, never 0)
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0
    reasoning_tokens: int | None = 0
    cached_tokens: int | None = 0
    latency_s: float = 0.0
    attempts: int = 0
    cache_hit: bool = False
    cost_usd: float | None = Field(
        None, description="USD at the condition's prices; None: the model has no price (unknown)."
    )
    repair: bool = False
    request_key: str = ""
    error: str | None = None
    served_model: str | None = Field(
        None,
        description="The model the endpoint named in its answer when that is not `model` (a "
        "dated snapshot, or another model a router chose); None: the same, or none named.",
    )
    usage_implausible: bool = Field(
        False,
        description="True: the answer reported token counts that cannot be true (bounds in "
        "`mbb.llm.provider`), so its tokens and cost are recorded unknown (null) rather than "
        "taken; False: the counts were taken, or none were reported.",
    )


Event = Annotated[
    RunStarted
    | SubrunStarted
    | SubrunEnded
    | RunEnded
    | Requested
    | Withdrawn
    | ThinkingCharged
    | RoundStarted
    | Declared
    | MessagePosted
    | BallotCast
    | InvalidAction
    | SchedulePublished
    | BallotsPublished
    | WindowStarted
    | Payment
    | WindowEnded
    | WindowDropped
    | Terminated
    | Completed
    | ScratchWritten
    | Evaluated
    | CommandRun
    | HiddenTestResult
    | LlmCall,
    Field(discriminator="kind"),
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
EVENT_KINDS: dict[str, type[EventBase]] = {
    cls.model_fields["kind"].default: cls for cls in EventBase.__subclasses__()
}


def parse_events(lines: Iterable[str]) -> list[Event]:
    """Parse and validate lines into typed events (slow path: tests, audits)."""
    return [EVENT_ADAPTER.validate_json(line) for line in lines]
