"""A content-addressed response cache in one sqlite file.

The key is a SHA-256 of the canonical request (model, messages, sampling params, response format
or tools — never the endpoint's key and never the base URL, so a recorded run replays against any
endpoint serving the same model). Modes: "off"; "read_write" (hits are served, misses are
fetched and stored); "replay" (zero network calls: a miss is an error naming the request).
A stored answer holds its latency (`latency_s`) too, so a replay charges what the recorded run
charged (`time.model: charged`); entries from before carry none and replay with 0. How entries
are read and written is `mbb.llm.wrappers.Cached`.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Literal

from mbb.core.errors import CacheMiss, LlmCacheError

__all__ = ["CacheMiss", "CacheMode", "LlmCache", "LlmCacheError", "request_key", "schema_problem"]

CacheMode = Literal["off", "read_write", "replay"]

# How long opening or writing the cache waits for another process that holds its lock.
_LOCK_WAIT_S = 30.0


def _is_lock(exc: sqlite3.DatabaseError) -> bool:
    """True when SQLite refused because another connection holds the file (BUSY or LOCKED)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def schema_problem(db: sqlite3.Connection) -> str | None:
    """Why the database open on `db` is not an LLM cache mbb would write, or None. mbb's cache
    holds one table, `responses`, and its key's index; a view or a trigger in a received
    folder's cache can make any read or write run for ever (a view that recurses without end,
    a trigger on every insert), so a file holding one is refused, not read."""
    rows = db.execute("SELECT type, name FROM sqlite_master").fetchall()
    for kind, name in rows:
        if kind in ("view", "trigger"):
            return f"it holds a {kind} ({str(name)[:40]!r}), which mbb's caches never do"
    if rows and ("table", "responses") not in {(k, n) for k, n in rows}:
        return "it has no table `responses`"
    return None


def request_key(request: dict[str, Any]) -> str:
    """Hex SHA-256 of the canonical JSON of a request body (sorted keys, no whitespace)."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # a lone surrogate in a request keys it too (its send then fails, a failed call): it had
    # raised here, outside every wrapper, as an unrecorded default (F3 of red team rt37)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


class LlmCache:
    """Maps request keys to stored results. One connection, used from one event loop thread."""

    def __init__(self, path: str | Path | None, mode: CacheMode = "read_write") -> None:
        if mode not in ("off", "read_write", "replay"):
            raise ValueError(f"cache mode must be off, read_write or replay, got {mode!r}")
        self.mode: CacheMode = mode
        self.path = None if path is None else Path(path)
        self.hits = 0
        self.misses = 0
        self._db: sqlite3.Connection | None = None
        if self.path is not None and mode != "off" and self.path.is_symlink():
            raise LlmCacheError(
                f"{self.path}: a symbolic link; mbb opens an LLM cache only as a file of its own "
                "(a link in a received folder could point at any of yours): name the real file"
            )
        if mode != "off":
            self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        """Connect and set the file up, waiting out other processes that hold it.

        Parallel workers of one study share the cache file, so two of them can open it in the
        same instant; switching to WAL or creating the table can then meet a lock that SQLite
        reports at once rather than through its busy timeout. Such a lock is retried with a
        growing pause for up to `_LOCK_WAIT_S` seconds (mbb's choice); anything else that is
        wrong with the file is an error at once.
        """
        deadline = time.monotonic() + _LOCK_WAIT_S
        pause = 0.01
        while True:
            try:
                return self._connect()
            except sqlite3.DatabaseError as exc:
                if _is_lock(exc) and time.monotonic() < deadline:
                    time.sleep(pause)
                    pause = min(pause * 2, 0.5)
                    continue
                if _is_lock(exc):
                    raise LlmCacheError(
                        f"{self.path}: the LLM cache stayed locked by another process for "
                        f"{_LOCK_WAIT_S:.0f} s; stop the other run or set llm.cache_file to "
                        "another file"
                    ) from None
                raise LlmCacheError(
                    f"{self.path}: the LLM cache is not a usable SQLite database ({exc}); move "
                    "it away or set llm.cache_file to another file"
                ) from None

    def _connect(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = None
        try:
            if self.path is None:
                db = sqlite3.connect(":memory:")
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.path, timeout=_LOCK_WAIT_S, check_same_thread=False)
                why = schema_problem(db)
                if why is not None:
                    raise LlmCacheError(
                        f"{self.path}: not an LLM cache of mbb's: {why}; move it away or set "
                        "llm.cache_file to another file"
                    )
                # WAL + NORMAL: a commit no longer fsyncs (it blocked the event loop ~15 ms
                # per stored response); a crash can lose only the last responses.
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT, "
                "request TEXT, response TEXT, created REAL)"
            )
            db.commit()
        except BaseException:
            if db is not None:
                db.close()
            raise
        return db

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    def get(self, key: str) -> dict[str, Any] | None:
        if self._db is None:
            return None
        row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return json.loads(row[0])

    def put(self, key: str, request: dict[str, Any], response: dict[str, Any]) -> None:
        """Store a response (read_write only; replay never writes)."""
        if self._db is None or self.mode != "read_write":
            return
        self._db.execute(
            "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
            (
                key,
                str(request.get("model", "")),
                json.dumps(request, sort_keys=True),
                json.dumps(response, sort_keys=True),
                time.time(),
            ),
        )
        self._db.commit()

    def __len__(self) -> int:
        if self._db is None:
            return 0
        return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
