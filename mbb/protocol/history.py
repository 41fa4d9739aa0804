"""A summary of a subrun's earlier rounds and messages, for negotiators whose prompt shows only
the latest rounds and messages in full (and for the snapshot a conversation restarts from when
it is compacted).

The paper's history summary keeps "conditional future commitments, settled ordering rules,
actual bids and outcomes, and unresolved matters" and drops the rest. Across subruns that is the
negotiator's own condensed history (a model writes it into scratch). Within a subrun, mbb's
choice is to summarise deterministically from what the worker saw, keeping the text itself, so
nothing promised can be lost to a cut or a compaction and no classifier decides what counts as
a promise:

- `rounds_summary`: every left-out round's outcome (order, bids, seconds allocated and used),
  then the published ballot reasoning of those rounds, each cut to `TEXT_CHARS`;
- `posts_summary`: the text of every left-out message and declaration note, each cut to
  `TEXT_CHARS`.

Both are bounded (`budget` characters). When the texts do not fit, those that involve the
worker are kept first — private messages to or from it, then its own and others' public words
that name it — then the rest, newest first; what is left out is counted by author, so the worker
knows something is missing. Kept lines stay in their original order. Outcome lines that do not
fit become one tally line per worker (windows, first places, mean bid, seconds).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mbb.core.agent_api import PastRound
    from mbb.core.board import Post

__all__ = ["POSTS_BUDGET", "ROUNDS_BUDGET", "TEXT_CHARS", "posts_summary", "rounds_summary"]

TEXT_CHARS = 240  # one kept message or reasoning, cut to this many characters
ROUNDS_BUDGET = 3000  # characters of `rounds_summary`
POSTS_BUDGET = 3000  # characters of `posts_summary`


@dataclass
class _Tally:
    windows: int = 0
    first: int = 0
    bid_total: int = 0
    allocated_s: int = 0
    used_s: float = 0.0


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


def _names(text: str, worker: str | None) -> bool:
    return worker is not None and re.search(rf"\b{re.escape(worker)}\b", text) is not None


def _fit(items: list[tuple[int, int, str]], budget: int) -> tuple[list[int], list[int]]:
    """Indices of `items` (priority, position, line) kept within `budget` characters (lowest
    priority value first, then the newest), and those left out; both in position order."""
    kept: list[int] = []
    used = 0
    for i in sorted(range(len(items)), key=lambda i: (items[i][0], -items[i][1])):
        n = len(items[i][2]) + 1
        if used + n <= budget:
            kept.append(i)
            used += n
    left = sorted(set(range(len(items))) - set(kept))
    return sorted(kept), left


def _tally_lines(rounds: Sequence[PastRound]) -> list[str]:
    tally: dict[str, _Tally] = {}
    for r in rounds:
        for pos, w in enumerate(r.order):
            t = tally.setdefault(w, _Tally())
            t.windows += 1
            t.first += pos == 0
            t.bid_total += r.bids.get(w, 0)
            t.allocated_s += r.allocations.get(w, 0)
            t.used_s += r.used.get(w, 0.0)
    return [
        f"- {w}: {t.windows} window(s), {t.first} first; mean bid "
        f"{t.bid_total / t.windows:.0f}; {t.allocated_s} s allocated, {t.used_s:.0f} s used"
        for w, t in sorted(tally.items())
    ]


def _outcome_line(r: PastRound) -> str:
    parts = []
    for pos, w in enumerate(r.order, 1):
        used = f", used {r.used[w]:.0f} s" if w in r.used else ""
        parts.append(f"#{pos} {w} (bid {r.bids.get(w, 0)}, {r.allocations.get(w, 0)} s{used})")
    return f"- round {r.round}: " + "; ".join(parts)


def rounds_summary(
    rounds: Sequence[PastRound], me: str | None = None, budget: int = ROUNDS_BUDGET
) -> str:
    """`rounds` as the worker `me` saw them, within `budget` characters: each round's outcome
    (or, when those do not fit, one tally per worker), then the published ballot reasoning of
    those rounds (see the module docstring for what is kept first). '' for no rounds."""
    if not rounds:
        return ""
    span = (
        f"round {rounds[0].round}"
        if len(rounds) == 1
        else f"rounds {rounds[0].round}-{rounds[-1].round}"
    )
    head = f"Summary of {span} (public):"
    outcomes = [_outcome_line(r) for r in rounds]
    if sum(len(x) + 1 for x in outcomes) > budget // 2:
        outcomes = ["Windows per worker:", *_tally_lines(rounds)]
    texts: list[tuple[int, int, str]] = []
    for r in rounds:
        for w, why in sorted(r.reasoning.items()):
            if not why.strip():
                continue
            mine = w == me or _names(why, me)
            texts.append((0 if mine else 1, len(texts), f"- round {r.round}, {w}: {_cut(why)!r}"))
    left_budget = budget - len(head) - sum(len(x) + 1 for x in outcomes)
    kept, left = _fit(texts, max(0, left_budget - 80))
    lines = [head, *outcomes]
    if texts:
        lines.append("Ballot reasoning of those rounds:")
        lines += [texts[i][2] for i in kept]
        if left:
            lines.append(f"({len(left)} more ballot reasoning(s) not shown)")
    return "\n".join(lines)


def posts_summary(posts: Sequence[Post], me: str, budget: int = POSTS_BUDGET) -> str:
    """The messages and declaration notes of `posts` that a prompt leaves out, as `me` saw
    them, within `budget` characters: their text (see the module docstring for what is kept
    first), then how many of the rest each author sent. '' for none."""
    if not posts:
        return ""
    items: list[tuple[int, int, str]] = []
    for i, p in enumerate(posts):
        author = "you" if p.author == me else p.author
        if p.kind == "schedule":
            continue  # the round's outcome is in the rounds' record
        if p.to is not None:
            to = "you" if p.to == me else p.to
            prio, line = 0, f"[r{p.round}] {author} → {to} (private): {_cut(p.text)}"
        else:
            sep = " (declaration note):" if p.kind == "note" else " → everyone:"
            prio = 1 if (p.author == me or _names(p.text, me)) else 2
            line = f"[r{p.round}] {author}{sep} {_cut(p.text)}"
        items.append((prio, i, line))
    head = f"{len(posts)} earlier message(s), not shown in full:"
    kept, left = _fit(items, max(0, budget - len(head) - 120))
    lines = [head, *(items[i][2] for i in kept)]
    if left:
        public: dict[str, int] = {}
        private: dict[str, int] = {}
        for i in left:
            p = posts[items[i][1]]
            author = "you" if p.author == me else p.author
            bucket = public if p.to is None else private
            bucket[author] = bucket.get(author, 0) + 1
        parts = [f"{a} {n} public" for a, n in sorted(public.items())]
        parts += [f"{a} {n} private" for a, n in sorted(private.items())]
        lines.append(f"({len(left)} more not shown: {', '.join(parts)})")
    return "\n".join(lines)
