"""Named things of one kind, registered once and looked up by name: the rules of the protocol
(`mbb.protocol.rules`), the personas (`mbb.agents.personas`), the agent backends
(`mbb.agents.backends`). A condition names them as plain strings (`mbb.params`); the run builder
(`mbb.batch.build`) checks every name against its registry before a run starts, and an unknown
name is one line listing the valid ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Generic, Protocol, TypeVar

__all__ = ["Named", "Registry", "UnknownName"]


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


class UnknownName(ValueError):
    """A name no entry of a registry has; the message is one line listing the valid names."""


class Registry(Generic[T]):
    """Entries of one kind (`what`: how an error names them), in registration order."""

    def __init__(self, what: str, entries: Iterable[T] = ()) -> None:
        self.what = what
        self._entries: dict[str, T] = {}
        for entry in entries:
            self.register(entry)

    def register(self, entry: T) -> T:
        """Add an entry (a name registered twice is an error); returns it, so it can decorate."""
        if entry.name in self._entries:
            raise ValueError(f"{self.what} {entry.name!r} is registered twice")
        self._entries[entry.name] = entry
        return entry

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def unknown(self, name: str) -> str:
        """The one-line error for a name this registry lacks."""
        return f"unknown {self.what} {name!r}; valid: {', '.join(self._entries)}"

    def __getitem__(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownName(self.unknown(name)) from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[T]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)
