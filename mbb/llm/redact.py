"""Secrets never written: the values of the API keys a run may use, cut out of everything an
endpoint sends back before any of it is kept.

An endpoint (or a proxy in front of it) can echo the request's `Authorization` header — in an
error body, the answer's text, a reasoning field, a tool call's arguments, a usage field. Every
such string passes through `Redactor.text` where it enters mbb (`OpenAICompatibleProvider`), and
again where answers are stored or recorded (`Cached`, `Audited`), so no event, cache entry,
table, report or viewer page derived from them can hold a key.

What is redacted, for every key value of at least `MIN_SECRET` characters: the value itself,
its URL-encoded form, and its base64 (standard and URL-safe alphabets) at each of the three
alignments it can take inside a longer base64 text (an echoed `Basic`/`Bearer` header encoded
whole) — all replaced by `[redacted]`; and any run of at least `FRAGMENT` consecutive
characters of the value (an endpoint echoed a key without its `sk-` prefix, "token
rt-SECRET-123456 is not allowed", and 16 of its 19 characters reached the events, the cache,
study.json and the terminal). Matching ignores letter case, fragments too: an endpoint that
lower-cased the key it echoed (a `Content-Encoding` header turned into an error text) got the
whole key past an exact match (F2 of red team rt37). A key shorter than `MIN_SECRET` characters
is not redacted: it would garble ordinary text and protects nothing. An endpoint that wants
to leak a key it was sent can always encode it some other way; the guarantee is about echoes,
whole or in part.
"""

from __future__ import annotations

import base64
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["FRAGMENT", "MIN_SECRET", "REDACTED", "Redactor", "key_values"]

REDACTED = "[redacted]"
MIN_SECRET = 8
_MIN_ENCODED = 12  # base64 cores shorter than this are too likely to occur by chance
# the shortest run of a key's characters cut out wherever it appears: longer than the fixed
# prefixes keys share ("sk-proj-" is 8), short enough that an echo missing a few characters at
# either end is still cut (mbb's choice)
FRAGMENT = 10
_BLOCK = FRAGMENT // 2  # a run of FRAGMENT characters holds a whole block at a multiple of this
_BLOCKS = re.compile(f".{{{_BLOCK}}}", re.DOTALL)
# ASCII letters folded to lower case, nothing else: the text keeps its length, so a span found
# in the folded text is the same span of the original (str.lower can change lengths)
_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _encodings(secret: str) -> set[str]:
    forms = {secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret)}
    raw = secret.encode()
    for k in range(3):  # the secret's byte k starting a base64 group
        m = (len(raw) - k) // 3
        core = base64.b64encode(raw[k : k + 3 * m]).decode()
        if len(core) >= _MIN_ENCODED:
            forms.add(core)
            forms.add(core.replace("+", "-").replace("/", "_"))
    return {f for f in forms if len(f) >= MIN_SECRET}


def key_values(names: Iterable[str | None], environ: Mapping[str, str] | None = None) -> set[str]:
    """The values of the environment variables `names` (the unset and empty ones left out)."""
    env = os.environ if environ is None else environ
    return {v for n in names if n and (v := env.get(n))}


class Redactor:
    """Cuts the values of secrets (and their encodings) out of text and JSON-like data.

    `secrets`: values to redact; `add` takes more (a key read later). Cheap when empty."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        # every _BLOCK-long run of a secret -> (secret, where it starts in it): a run of
        # FRAGMENT or more holds one of them at a multiple of _BLOCK in any text
        self._blocks: dict[str, list[tuple[str, int]]] = {}
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        new = {s for s in secrets if s and len(s) >= MIN_SECRET} - self._secrets
        if not new:
            return
        self._secrets |= new
        forms = sorted({f for s in self._secrets for f in _encodings(s)}, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, forms)), re.IGNORECASE)
        for secret in new:
            low = secret.translate(_FOLD)
            for i in range(len(low) - _BLOCK + 1):
                self._blocks.setdefault(low[i : i + _BLOCK], []).append((low, i))

    def _runs(self, value: str, blocks: list[str]) -> list[tuple[int, int]]:
        """The spans of `value` that are runs of FRAGMENT or more of a secret's consecutive
        characters, each as long as the echo follows the secret, merged where they overlap.

        value: the text, its ASCII letters lower-cased (`_FOLD`); blocks: its _BLOCK-long
        pieces at multiples of _BLOCK."""
        spans = []
        for k in [k for k, b in enumerate(blocks) if b in self._blocks]:
            p = k * _BLOCK
            for secret, i in self._blocks[blocks[k]]:
                start, at = p, i  # extend left, then right, while the text follows the secret
                while start > 0 and at > 0 and value[start - 1] == secret[at - 1]:
                    start, at = start - 1, at - 1
                end, at = p + _BLOCK, i + _BLOCK
                while end < len(value) and at < len(secret) and value[end] == secret[at]:
                    end, at = end + 1, at + 1
                if end - start >= FRAGMENT:
                    spans.append((start, end))
        merged: list[tuple[int, int]] = []
        for start, end in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return merged

    def _cut(self, value: str) -> str:
        """`value` with whole secrets and their encodings, then every run of FRAGMENT or more
        of a secret's consecutive characters, replaced (a run is cut as far as it goes)."""
        assert self._pattern is not None
        value = self._pattern.sub(REDACTED, value)
        # most texts hold no block of a secret at a multiple of _BLOCK: one set test (1 ms on
        # 60 kB) settles them
        folded = value.translate(_FOLD)
        blocks = _BLOCKS.findall(folded)
        if self._blocks.keys().isdisjoint(blocks):
            return value
        out: list[str] = []
        pos = 0
        for start, end in self._runs(folded, blocks):
            out += [value[pos:start], REDACTED]
            pos = end
        out.append(value[pos:])
        return "".join(out)

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, value: str | None) -> str | None:
        """`value` with every secret replaced by `[redacted]` (None stays None)."""
        if value is None or self._pattern is None:
            return value
        return self._cut(value)

    def data(self, value: Any) -> Any:
        """A copy of JSON-like `value` (dicts, lists, strings; keys too) with every string
        redacted."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self._cut(value)
        if isinstance(value, Mapping):
            return {self.data(k): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.data(v) for v in value)
        return value
