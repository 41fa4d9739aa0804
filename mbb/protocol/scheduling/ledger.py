"""The credit ledger: balances per worker, payments to the operator, nothing created or lost.

Invariant (checked by `audit`): sum of balances + operator revenue == credits granted so far.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Ledger", "LedgerError"]


class LedgerError(RuntimeError):
    """A payment the ledger cannot honour; the arena never lets this happen (bids are clamped)."""


@dataclass
class Ledger:
    balances: dict[str, int] = field(default_factory=dict)
    revenue: int = 0
    granted: int = 0

    def grant(self, worker: str, credits: int) -> None:
        """Give credits (start of run, or a per-subrun reset top-up)."""
        if credits < 0:
            raise LedgerError(f"cannot grant negative credits ({credits}) to {worker}")
        self.balances[worker] = self.balances.get(worker, 0) + credits
        self.granted += credits

    def reset(self, worker: str, credits: int) -> None:
        """Set a balance to `credits` (a per-subrun reset); the difference counts as granted."""
        delta = credits - self.balances.get(worker, 0)
        self.balances[worker] = credits
        self.granted += delta

    def pay(self, worker: str, amount: int) -> int:
        """Move `amount` from the worker to the operator; returns the new balance."""
        if amount < 0:
            raise LedgerError(f"negative payment {amount} by {worker}")
        bal = self.balances[worker]
        if amount > bal:
            raise LedgerError(f"{worker} cannot pay {amount}: balance {bal}")
        self.balances[worker] = bal - amount
        self.revenue += amount
        return bal - amount

    def audit(self) -> None:
        if any(b < 0 for b in self.balances.values()):
            raise LedgerError(f"negative balance: {self.balances}")
        total = sum(self.balances.values()) + self.revenue
        if total != self.granted:
            raise LedgerError(f"credits not conserved: {total} held+paid vs {self.granted} granted")
