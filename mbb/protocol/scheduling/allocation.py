"""Allocation rules of the negotiated mechanism: how long each scheduled window is.

Names and the sentences that explain each rule to agents live in `mbb.protocol.rules`.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

__all__ = ["declared_durations", "median_ballot"]


def median_ballot(
    order: Sequence[str],
    declared: Mapping[str, int],
    ballot_allocations: Sequence[Mapping[str, int]],
) -> dict[str, int]:
    """The lower median of the ballots' allocations, capped at the declared duration."""
    return {
        x: min(declared[x], int(statistics.median_low(a[x] for a in ballot_allocations)))
        for x in order
    }


def declared_durations(
    order: Sequence[str],
    declared: Mapping[str, int],
    ballot_allocations: Sequence[Mapping[str, int]],
) -> dict[str, int]:
    """Each window is the duration its holder declared (ballot allocations are ignored)."""
    return {x: declared[x] for x in order}
