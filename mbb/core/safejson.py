"""JSON from files anyone can write (a colleague's run folder, a model's answer), read so that
nothing but a ValueError comes out.

`json.loads` of text nested deeper than its parser recurses ("[[[[..." 100,000 deep) raises
RecursionError, which is not a ValueError: every reader written `except ValueError` let it
through, and `mbb view`, `load_runs` and `mbb run --out` crashed on such a file."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["loads"]


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`, with JSON nested too deeply for the parser raising JSONDecodeError
    (a ValueError) like any other malformed JSON.

    text: the JSON document."""
    try:
        return json.loads(text)
    except RecursionError:
        doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError("JSON nested too deeply", doc[:100], 0) from None
