"""The utterance file format read by `mbb classify`, `mbb validate-classifier` and the
training script: one JSON object per line (JSONL, UTF-8).

    {"id": "A-0001", "channel": "note|private|public|ballot", "text": "...",
     "labels": ["anchoring", ...],          # gold files only; [] means neutral
     "main": "anchoring",                   # optional: the label the item was written for
     "writer": "A",                         # optional
     "style": "terse",                      # optional: the style the writer was asked for
     "context": {"speaker": "W2", "to": "W4", "round": 3, "subrun": 2,
                 "bids": {"W1": 150}, "durations": {"W1": 120}, "arrival": ["W2", "W1"],
                 "deadlines_disclosed": {"W1": 380}, "ranking": ["W2", "W1"],
                 "previous_schedule": ["W1", "W2"], "in_reply_to": "W1: ...",
                 "earlier": ["subrun 1 round 2, W3 (public): ..."]}}

Every context key is optional, and so is `style` (one of `STYLES`: the second round of writers
tagged each item with the style it was written in; the first ten writers' items have none).
Bad input is never silently dropped: a line that is not JSON, or
does not fit the format, raises `CorpusError` naming the file and line; an unknown category
name lists the valid ones; a repeated id is an error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mbb.core import safejson
from mbb.core.taxonomy import ALL_LABELS

__all__ = [
    "CHANNELS",
    "STYLES",
    "Context",
    "CorpusError",
    "Utterance",
    "read_utterances",
    "source_of",
]

Channel = Literal["note", "private", "public", "ballot"]
Style = Literal[
    "context",
    "negation",
    "ballot_ranking",
    "enacted",
    "blunt",
    "terse",
    "nonnative",
    "verbose",
    "plain",
]
# the writers' brief: `context` (the category visible only across 2-3 messages), `negation`
# (refusals, conditionals, hypotheticals), `ballot_ranking` (reasoning that needs its ranking),
# `enacted` (the act without its usual words), `blunt` (sarcastic, curt), `terse` (trader
# shorthand), `nonnative` (English of a non-native speaker), `verbose` (hedged, polite), `plain`
STYLES: tuple[str, ...] = get_args(Style)
CHANNELS: tuple[str, ...] = get_args(Channel)
# mbb's run tables call the channels by their event: a declaration note, a message, a ballot
_SOURCE = {"note": "declaration", "private": "message", "public": "message", "ballot": "ballot"}


class CorpusError(ValueError):
    """A malformed utterance file: the message names the file and the line."""


class Context(BaseModel):
    """The event context an utterance needs to be judged (all optional)."""

    model_config = ConfigDict(extra="allow")  # more context is kept, never an error

    speaker: str | None = None
    to: str | None = None
    round: int | None = None
    subrun: int | None = None
    bids: dict[str, float] | None = None
    durations: dict[str, float] | None = None
    arrival: list[str] | None = None
    deadlines_disclosed: dict[str, float] | None = None
    ranking: list[str] | None = None
    previous_schedule: list[str] | None = None
    in_reply_to: str | None = None
    earlier: list[str] | None = None


class Utterance(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    channel: Channel
    text: str
    labels: list[str] | None = None
    main: str | None = None
    writer: str | None = None
    style: Style | None = None
    context: Context = Field(default_factory=Context)

    @field_validator("labels")
    @classmethod
    def _known_labels(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        for lab in v:
            if lab not in ALL_LABELS:
                raise ValueError(f"unknown category {lab!r}; valid: {', '.join(ALL_LABELS)}")
        return sorted(set(v))

    @field_validator("main")
    @classmethod
    def _known_main(cls, v: str | None) -> str | None:
        if v is not None and v != "neutral" and v not in ALL_LABELS:
            raise ValueError(
                f"unknown category {v!r} in main; valid: neutral, {', '.join(ALL_LABELS)}"
            )
        return v

    @property
    def source(self) -> str:
        return _SOURCE[self.channel]


def source_of(channel: str) -> str:
    """The run-table `source` of a channel: declaration, message or ballot."""
    return _SOURCE[channel]


def _first_error(exc: ValidationError) -> str:
    e = exc.errors()[0]
    where = ".".join(str(p) for p in e["loc"])
    msg = e["msg"].removeprefix("Value error, ")
    return f"{where}: {msg}" if where else msg


def parse_lines(
    lines: Iterable[str], name: str, *, require_labels: bool = False
) -> list[Utterance]:
    """Utterances from JSONL lines; `name` is used in error messages. Blank lines are skipped
    (they carry nothing); every other line must be a valid utterance."""
    out: list[Utterance] = []
    seen: dict[str, int] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = safejson.loads(line)
        except ValueError as exc:  # JSONDecodeError, or a number too long to convert to int
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc).split(":")[0]
            raise CorpusError(f"{name}:{n}: not valid JSON ({why})") from None
        if not isinstance(obj, dict):
            raise CorpusError(f"{name}:{n}: expected a JSON object, got {type(obj).__name__}")
        try:
            u = Utterance.model_validate(obj)
        except ValidationError as exc:
            raise CorpusError(f"{name}:{n}: {_first_error(exc)}") from None
        if require_labels and u.labels is None:
            raise CorpusError(f"{name}:{n}: no 'labels' (a gold file needs them; [] = neutral)")
        if u.id in seen:
            raise CorpusError(f"{name}:{n}: id {u.id!r} repeats line {seen[u.id]}")
        seen[u.id] = n
        out.append(u)
    return out


def read_utterances(path: str | Path, *, require_labels: bool = False) -> list[Utterance]:
    """Read and validate an utterance (or gold) file; raises `CorpusError` on bad input."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CorpusError(f"{p}: no such file") from None
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{p}: not UTF-8 ({exc.reason})") from None
    items = parse_lines(text.splitlines(), str(p), require_labels=require_labels)
    if not items:
        raise CorpusError(f"{p}: no utterances")
    return items
