"""The board: append-only posts with exact per-reader visibility.

A post is public (`to=None`) or addressed to one peer. A reader sees public posts, posts
addressed to it and its own posts — nothing else. Each reader's visible list is maintained as
posts arrive, so reading is O(1) per round rather than a scan of the whole board.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Board", "Post"]


@dataclass(frozen=True, slots=True)
class Post:
    seq: int
    author: str
    to: str | None  # None = public
    subrun: int
    round: int
    turn: int
    text: str
    kind: str = "message"  # message | note (declaration note) | schedule
    payload: tuple[dict[str, Any], ...] = ()

    @property
    def public(self) -> bool:
        return self.to is None


@dataclass
class Board:
    readers: list[str]
    posts: list[Post] = field(default_factory=list)
    _visible: dict[str, list[Post]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._visible = {r: [] for r in self.readers}

    def add_reader(self, reader: str) -> None:
        """A newcomer sees the public posts made before it arrived, and no private ones."""
        self._visible.setdefault(reader, [p for p in self.posts if p.public])

    def post(
        self,
        author: str,
        text: str,
        *,
        to: str | None,
        subrun: int,
        round: int,
        turn: int,
        kind: str = "message",
        payload: Iterable[dict[str, Any]] = (),
    ) -> Post:
        if author not in self._visible:
            raise KeyError(f"unknown author {author!r}")
        if to is not None and to not in self._visible:
            raise KeyError(f"unknown recipient {to!r}")
        p = Post(len(self.posts), author, to, subrun, round, turn, text, kind, tuple(payload))
        self.posts.append(p)
        if to is None:
            for lst in self._visible.values():
                lst.append(p)
        else:
            self._visible[author].append(p)
            if to != author:
                self._visible[to].append(p)
        return p

    def visible(self, reader: str) -> Sequence[Post]:
        """The reader's visible posts, not copied (read-only: views for one phase)."""
        return self._visible[reader]

    def visible_to(self, reader: str, *, subrun: int | None = None) -> list[Post]:
        """Posts the reader may see, in posting order (optionally only one subrun's)."""
        posts = self._visible[reader]
        if subrun is None:
            return list(posts)
        return [p for p in posts if p.subrun == subrun]

    def clear_visible_before(self, subrun: int) -> None:
        """Drop earlier subruns from every reader's view (they stay in `posts` and the log)."""
        for reader, lst in self._visible.items():
            self._visible[reader] = [p for p in lst if p.subrun >= subrun]
