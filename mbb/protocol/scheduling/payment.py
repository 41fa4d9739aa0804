"""Payment rules of the negotiated mechanism: what each holder of a published schedule pays.

A price is charged when the holder's window starts (a holder terminated before then pays
nothing); every rule here charges at most the holder's own bid, so a ledger never overdraws.
The names, and the sentences that explain each rule to agents, live in `mbb.protocol.rules`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["next_price", "no_payment", "pay_your_bid"]


def pay_your_bid(order: Sequence[str], bids: Mapping[str, int]) -> dict[str, int]:
    """Each holder pays its own bid (the paper's rule)."""
    return {x: bids[x] for x in order}


def next_price(order: Sequence[str], bids: Mapping[str, int]) -> dict[str, int]:
    """Generalised second price: the next bid down the schedule, capped at one's own bid (the
    last holder pays 0)."""
    return {
        x: min(bids[x], bids[order[i + 1]] if i + 1 < len(order) else 0)
        for i, x in enumerate(order)
    }


def no_payment(order: Sequence[str], bids: Mapping[str, int]) -> dict[str, int]:
    """Nothing is charged; bids only signal priority."""
    return dict.fromkeys(order, 0)
