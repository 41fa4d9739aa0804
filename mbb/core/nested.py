"""Nested params dumps compared: what of them makes two runs the same run
(`comparable_params`), and the first field where two differ, said in one line (the
output-folder guard and the tables' one-condition check name it in their errors)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["comparable_params", "first_difference"]


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


# how a model is reached, not what it is asked: another port or key variable is the same run
_TRANSPORT = (
    "base_url",
    "api_key_env",
    "timeout_s",
    "max_retries",
    "concurrency",
    "rpm",
    "tpm",
    "cache_hints",
)


def comparable_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Params without how LLM answers are obtained and paid for (the cache, spend caps, the
    endpoint's address and transport settings): re-running the same run in replay mode, with a
    higher cap or against the same model served elsewhere, is the same run. What the agents
    are asked (models, sampling, the solver's loop) stays."""
    out = dict(params)
    llm = out.get("llm")
    if isinstance(llm, Mapping):
        out["llm"] = {k: v for k, v in llm.items() if k == "solver"}
    models = out.get("models")
    if isinstance(models, Mapping):
        out["models"] = {
            name: {k: v for k, v in cfg.items() if k not in _TRANSPORT}
            for name, cfg in models.items()
            if isinstance(cfg, Mapping)
        }
    return out
