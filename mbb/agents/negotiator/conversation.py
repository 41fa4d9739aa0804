"""One LLM negotiator's conversation for a subrun, laid out for servers' prefix caches.

Append-only: a static system prompt, then one user turn per call with only what is new since
the worker's previous turn, each followed by the answer exactly as received (and any repair
exchange). It restarts at a new subrun or a new system prompt, and — when it grows past its
character budget — from a full snapshot of the state (compaction), so a long subrun never
outgrows the model's context.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mbb.core.agent_api import RoundView

__all__ = ["Conversation"]


class Conversation:
    """The conversation state of one worker (see the module docstring). `max_chars`: the
    history's character budget before it restarts from a snapshot."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.system: str | None = None
        self.history: list[dict[str, Any]] = []
        self.chars = 0
        self.subrun: int | None = None
        self.seen_seq = -1  # last post shown
        self.seen_rounds = 0  # past rounds shown
        self.snapshot = False  # the next turn restarts a compacted conversation
        self.shown: dict[str, str] = {}  # situation / candidates / declarations last shown

    def reset(self, subrun: int | None) -> None:
        """Start empty (for `subrun`; None: between subruns)."""
        self.history, self.chars = [], 0
        self.subrun, self.seen_seq, self.seen_rounds = subrun, -1, 0
        self.snapshot = False
        self.shown = {}

    def messages(self, system: str, view: RoundView) -> list[dict[str, Any]]:
        """[system, *history] for the next call: restarted at a new subrun or a new system
        prompt, or compacted (restarted from a full snapshot) past `max_chars`."""
        if system != self.system or view.subrun != self.subrun:
            self.system = system
            self.reset(view.subrun)
        elif self.chars > self.max_chars:
            self.reset(view.subrun)
            self.snapshot = True
        return [{"role": "system", "content": system}, *self.history]

    def changed(self, key: str, text: str) -> str:
        """`text` if it differs from what this conversation last showed under `key`, else ''."""
        if self.shown.get(key) == text:
            return ""
        self.shown[key] = text
        return text

    def append(self, messages: Iterable[dict[str, Any]]) -> None:
        for m in messages:
            self.history.append(m)
            self.chars += len(m.get("content") or "")
