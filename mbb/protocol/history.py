"""A compact summary of a subrun's earlier rounds, for negotiators whose prompt shows only the
latest rounds and messages in full.

mbb's choice (the paper keeps a model-written history summary across subruns, which here is the
negotiator's condensed history in scratch): within a subrun, the rounds and messages a prompt
leaves out are summarised deterministically from the public record, so the prompt stays short
and nothing before the cut is lost entirely.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mbb.core.agent_api import PastRound
    from mbb.core.board import Post

__all__ = ["posts_summary", "rounds_summary"]


@dataclass
class _Tally:
    windows: int = 0
    first: int = 0
    bid_total: int = 0
    allocated_s: int = 0
    used_s: float = 0.0


def rounds_summary(rounds: Sequence[PastRound]) -> str:
    """One line per worker over `rounds`: windows won (first place), mean bid, seconds
    allocated and used. '' for no rounds."""
    if not rounds:
        return ""
    tally: dict[str, _Tally] = {}
    for r in rounds:
        for pos, w in enumerate(r.order):
            t = tally.setdefault(w, _Tally())
            t.windows += 1
            t.first += pos == 0
            t.bid_total += r.bids.get(w, 0)
            t.allocated_s += r.allocations.get(w, 0)
            t.used_s += r.used.get(w, 0.0)
    span = (
        f"round {rounds[0].round}"
        if len(rounds) == 1
        else (f"rounds {rounds[0].round}-{rounds[-1].round}")
    )
    lines = [f"Summary of {span} (public):"]
    for w in sorted(tally):
        t = tally[w]
        lines.append(
            f"- {w}: {t.windows} window(s), {t.first} first; mean bid "
            f"{t.bid_total / t.windows:.0f}; {t.allocated_s} s allocated, {t.used_s:.0f} s used"
        )
    return "\n".join(lines)


def posts_summary(posts: Sequence[Post], me: str) -> str:
    """How many of the left-out messages each author sent, public and to `me`. '' for none."""
    if not posts:
        return ""
    public: dict[str, int] = {}
    private: dict[str, int] = {}
    for p in posts:
        author = "you" if p.author == me else p.author
        bucket = public if p.to is None else private
        bucket[author] = bucket.get(author, 0) + 1
    parts = [f"{a} {n} public" for a, n in sorted(public.items())]
    parts += [f"{a} {n} private" for a, n in sorted(private.items())]
    return f"{len(posts)} earlier message(s) not shown ({', '.join(parts)})."
