"""Scratch: a worker's bounded persistent memory across subruns.

Entries are kept oldest-first; when the total exceeds `max_chars`, the oldest entries are
dropped (and the count reported) so the newest notes always fit. With memory and reports off the
arena wipes scratch at every subrun start, so nothing carries from one task to the next; with
only one of them off it `restrict`s scratch to the other's kinds (reports are kinds `report`,
the negotiator's, and `solver_report`).

A worker's scratch is shared by its negotiator and its solver: each entry records who wrote it
(`by`), and `render` tags every entry with it, so a reader tells its own notes from the other
agent's (a persona's `note` and a solver's `memory` note share the kind `note`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Scratch", "ScratchEntry"]

Author = Literal["negotiator", "solver"]
# how `render` names each kind (summary: the negotiator's condensed history)
_LABELS = {"summary": "condensed history", "solver_report": "report"}


@dataclass(frozen=True, slots=True)
class ScratchEntry:
    kind: str  # note | report | summary | debt | rule | solver_report
    subrun: int
    text: str
    by: Author = "negotiator"  # who wrote it: the worker's negotiator or its solver


@dataclass
class Scratch:
    """Entries are appended with `write` only (a running total of their characters is kept)."""

    max_chars: int
    entries: list[ScratchEntry] = field(default_factory=list)
    # called on every write with (entry as stored, chars of older entries it dropped): the arena
    # records each write as an event at the moment it happens
    on_write: Callable[[ScratchEntry, int], None] | None = field(
        default=None, repr=False, compare=False
    )
    _chars: int = field(default=0, init=False, repr=False, compare=False)
    # kinds `write` stores: only `_allow` (None: any) and never `_refuse`
    _allow: Collection[str] | None = field(default=None, init=False, repr=False, compare=False)
    _refuse: Collection[str] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._chars = sum(len(e.text) for e in self.entries)

    @property
    def chars(self) -> int:
        return self._chars

    def accepts(self, kind: str) -> bool:
        """Whether `write` stores an entry of `kind` (see `restrict`)."""
        return (self._allow is None or kind in self._allow) and kind not in self._refuse

    def restrict(
        self, *, allow: Collection[str] | None = None, refuse: Collection[str] = ()
    ) -> None:
        """Keep (and from now on store) only entries of the `allow`ed kinds (None: any) that
        are not `refuse`d; a write of another kind is ignored. Dropped entries are not logged."""
        self._allow, self._refuse = allow, refuse
        kept = [e for e in self.entries if self.accepts(e.kind)]
        if len(kept) != len(self.entries):
            self.entries[:] = kept
            self._chars = sum(len(e.text) for e in kept)

    def write(self, kind: str, subrun: int, text: str, *, by: Author = "negotiator") -> int:
        """Append an entry written `by` the worker's negotiator or its solver; returns how many
        characters of older entries were dropped to fit. A kind this scratch does not accept
        (`restrict`) is ignored (0)."""
        if not self.accepts(kind):
            return 0
        if len(text) > self.max_chars:
            text = text[: self.max_chars]
        entry = ScratchEntry(kind, subrun, text, by)
        self.entries.append(entry)
        self._chars += len(text)
        dropped = 0
        while self._chars > self.max_chars and len(self.entries) > 1:
            n = len(self.entries.pop(0).text)
            dropped += n
            self._chars -= n
        if self.on_write is not None:
            self.on_write(entry, dropped)
        return dropped

    def of_kind(self, kind: str) -> list[ScratchEntry]:
        return [e for e in self.entries if e.kind == kind]

    def render(self) -> str:
        """One line per entry, tagged with whose it is: `[solver's report, subrun 2] ...`."""
        return "\n".join(
            f"[{e.by}'s {_LABELS.get(e.kind, e.kind)}, subrun {e.subrun}] {e.text}"
            for e in self.entries
        )

    def wipe(self) -> None:
        self.entries.clear()
        self._chars = 0
