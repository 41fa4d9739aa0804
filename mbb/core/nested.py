"""Nested params dumps compared: the first field where two differ, said in one line (the
output-folder guard and the tables' one-condition check name it in their errors)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["first_difference"]


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, Mapping):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out or {prefix.rstrip("."): {}}
    return {prefix.rstrip("."): d}


def first_difference(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    labels: tuple[str, str] = ("there", "in this run"),
) -> str:
    """`field: old there, new in this run` for the first field where two params dumps differ
    (name and description last)."""
    a, b = _flatten(old), _flatten(new)
    keys = sorted(a.keys() | b.keys(), key=lambda k: (k in ("name", "description"), k))
    for key in keys:
        if a.get(key, "(unset)") != b.get(key, "(unset)"):
            va, vb = (_cut(json.dumps(x.get(key, "(unset)"))) for x in (a, b))
            return f"{key}: {va} {labels[0]}, {vb} {labels[1]}"
    return "same params"


def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[: limit - 3]}..."
