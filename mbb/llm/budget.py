"""Spend caps: stop a run or a sweep cleanly once it has spent its budget.

`llm.max_cost_usd` / `llm.max_tokens_total` in the params cap what one batch (`mbb run`, one
notebook's `run_many`) spends on NEW calls: answers from the replay cache are free and not
counted. A sweep's cap (`mbb sweep --max-cost-usd`, `--max-tokens-total`) is shared by all its
jobs through a small SQLite ledger named by `MBB_SPEND_LEDGER` (with `MBB_MAX_COST_USD`,
`MBB_MAX_TOKENS_TOTAL`), which every kernel of the sweep inherits.

The cap is checked before each network call. Once it is reached, the next call raises
`BudgetExhausted` (never sent); the arena ends the run with a `run_ended` event of status
"stopped" after the events of the phase in flight, so the log is whole. Calls already in flight
finish (a gathered phase can overshoot by at most its concurrent calls). Resuming later
(`mbb resume`, or the sweep again) replays the answers already paid for from the cache.

A cap in USD over a model without a price is refused when the condition loads, with one line
naming the model (`unpriced_cap`, called by `mbb.batch.build.check_condition`, a sweep and a
study): its cost is unknown, never $0, so the cap could never be reached.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mbb.core.errors import BudgetExhausted

__all__ = ["LEDGER_ENV", "BudgetExhausted", "SpendLedger", "ledger_for", "unpriced_cap"]

LEDGER_ENV = "MBB_SPEND_LEDGER"
COST_ENV = "MBB_MAX_COST_USD"
TOKENS_ENV = "MBB_MAX_TOKENS_TOTAL"


class SpendLedger:
    """Tokens and USD spent on new calls, against optional caps (in memory, or in a file shared
    by several processes)."""

    def __init__(
        self,
        max_cost_usd: float | None = None,
        max_tokens_total: int | None = None,
        path: str | Path | None = None,
        parent: SpendLedger | None = None,
    ) -> None:
        self.max_cost_usd = max_cost_usd
        self.max_tokens_total = max_tokens_total
        self.path = None if path is None else Path(path)
        self.parent = parent
        self._usd = 0.0
        self._tokens = 0
        self._lock = threading.Lock()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._db() as db:
                db.execute("CREATE TABLE IF NOT EXISTS spend (usd REAL, tokens INTEGER)")
                if db.execute("SELECT COUNT(*) FROM spend").fetchone()[0] == 0:
                    db.execute("INSERT INTO spend VALUES (0, 0)")

    def _db(self) -> sqlite3.Connection:
        assert self.path is not None
        return sqlite3.connect(self.path, timeout=30, isolation_level="IMMEDIATE")

    def spent(self) -> tuple[float, int]:
        if self.path is None:
            return self._usd, self._tokens
        db = sqlite3.connect(self.path, timeout=30)
        try:
            usd, tokens = db.execute("SELECT usd, tokens FROM spend").fetchone()
        finally:
            db.close()
        return float(usd), int(tokens)

    def add(self, tokens: int, usd: float) -> None:
        if self.path is None:
            with self._lock:
                self._usd += usd
                self._tokens += tokens
        else:
            with self._db() as db:
                db.execute("UPDATE spend SET usd = usd + ?, tokens = tokens + ?", (usd, tokens))
        if self.parent is not None:
            self.parent.add(tokens, usd)

    def exhausted(self) -> str | None:
        """Why no further call may be made (None: within the caps)."""
        if self.max_cost_usd is not None or self.max_tokens_total is not None:
            usd, tokens = self.spent()
            if self.max_cost_usd is not None and usd >= self.max_cost_usd:
                return f"spend cap reached: ${usd:.4f} of max_cost_usd ${self.max_cost_usd:g}"
            if self.max_tokens_total is not None and tokens >= self.max_tokens_total:
                return f"token cap reached: {tokens} of max_tokens_total {self.max_tokens_total}"
        return self.parent.exhausted() if self.parent is not None else None

    def caps_cost(self) -> bool:
        """Whether this ledger, or one it reports to, caps USD (so every call must be priced)."""
        if self.max_cost_usd is not None:
            return True
        return self.parent.caps_cost() if self.parent is not None else False

    def caps_tokens(self) -> bool:
        """Whether this ledger, or one it reports to, caps tokens (so every answer must report
        its token counts)."""
        if self.max_tokens_total is not None:
            return True
        return self.parent.caps_tokens() if self.parent is not None else False

    def check(self) -> None:
        why = self.exhausted()
        if why is not None:
            raise BudgetExhausted(why + "; resume later (answers already paid for are replayed)")


def unpriced_cap(cap: str, models: Iterable[str], prices: Mapping[str, Any]) -> str | None:
    """One line refusing spend cap `cap` (e.g. "llm.max_cost_usd = 5") over `models` (names
    sent to the endpoints) of which some have no price in `prices`; None when all are priced.
    An unpriced model's cost is unknown, so a cap in USD could never be reached by it."""
    missing = sorted({m for m in models if m not in prices})
    if not missing:
        return None
    names = ", ".join(repr(m) for m in missing)
    return (
        f"{cap} cannot be kept: model {names} has no price (add it to `prices:` in USD per 1M "
        "tokens, with its date and source; a free local model is priced at 0)"
    )


def _float(name: str) -> float | None:
    v = os.environ.get(name)
    return float(v) if v else None


def ledger_for(max_cost_usd: float | None, max_tokens_total: int | None) -> SpendLedger | None:
    """The batch's ledger (params caps), chained to the sweep's shared one when there is one."""
    parent = None
    path = os.environ.get(LEDGER_ENV)
    if path:
        tokens = _float(TOKENS_ENV)
        parent = SpendLedger(_float(COST_ENV), None if tokens is None else int(tokens), path)
    if parent is None and max_cost_usd is None and max_tokens_total is None:
        return None
    return SpendLedger(max_cost_usd, max_tokens_total, parent=parent)
