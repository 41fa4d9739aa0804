"""The actions a negotiator takes, as frozen, validated models shared by every backend.

Scripted personas and LLM negotiators produce the same models. Shape errors (a string where a
number belongs) fail validation; range errors that depend on the round (a bid over budget, an
unknown peer) are repaired by `mbb.protocol.scheduling.validation` under stated rules and recorded.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Ballot",
    "ConversationTurn",
    "Declaration",
    "Intent",
    "Message",
    "Request",
    "Withdraw",
]


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


IntentKind = Literal[
    "disclose_deadline",  # value = seconds left before the speaker's deadline
    "disclose_work",  # value = seconds of execution the speaker still needs
    "propose_rule",  # rule = rule id (e.g. "edf", "sjf", "tie_by_queue")
    "accept_rule",
    "cite_rule",
    "offer_concession",  # peer = who receives the concession; commitment = id of the debt created
    "accept_offer",
    "claim_debt",  # invoke a commitment the peer owes the speaker
    "honour_commitment",
    "break_commitment",
    "invite_coalition",
    "join_coalition",
    "target_rival",
    "step_aside",
    "support",  # back a peer's position
]


class Intent(_Action):
    """Machine-readable meaning of an utterance (scripted agents; LLM utterances carry none)."""

    kind: IntentKind
    peer: str | None = None
    rule: str | None = None
    commitment: str | None = None
    value: float | None = None


class Declaration(_Action):
    """Phase 1 (public): what a candidate asks for this round."""

    bid: int = Field(description="Credits offered, paid when the window starts (0..budget).")
    duration: int = Field(description="Seconds of execution requested (within window bounds).")
    position: int = Field(description="Desired position in the schedule (1..n).")
    note: str = Field("", description="Short public note.")
    labels: tuple[str, ...] = Field((), description="Ground-truth taxonomy labels (scripted).")
    intents: tuple[Intent, ...] = ()


class Message(_Action):
    """Phase 2: a private message to one peer (`to`) or a public post (`to=None`)."""

    to: str | None = None
    text: str
    labels: tuple[str, ...] = ()
    intents: tuple[Intent, ...] = ()


class ConversationTurn(_Action):
    """One conversation turn of one candidate: messages, and a revised declaration if allowed."""

    messages: tuple[Message, ...] = ()
    revision: Declaration | None = None

    @property
    def is_pass(self) -> bool:
        return not self.messages and self.revision is None


class Ballot(_Action):
    """Phase 3 (secret until published): a full ranking plus a time allocation per candidate."""

    ranking: tuple[str, ...]
    allocations: dict[str, int] = Field(
        default_factory=dict, description="Seconds per candidate (≤ its declared duration)."
    )
    reasoning: str = ""
    labels: tuple[str, ...] = ()
    intents: tuple[Intent, ...] = ()
    defaulted: bool = False  # the backend's stated default stands in for its answer


class Request(_Action):
    """A solver outside its window asks to join the queue for a window of `duration` seconds.
    `thought_s`: seconds of its own model time spent outside a window since its last action
    (the `charged` clock counts them against its worker's deadline; 0 otherwise)."""

    duration: int
    thought_s: float = 0.0


class Withdraw(_Action):
    """A solver gives up its task for the rest of the subrun (`thought_s`: as for a Request)."""

    reason: str = "withdrew"
    thought_s: float = 0.0


def as_payload(intents: tuple[Intent, ...]) -> list[dict[str, Any]]:
    return [i.model_dump(exclude_none=True) for i in intents]
