"""A study: conditions x models x roles x seeds from one YAML file, run by one command.

    mbb study studies/scarce.yaml               # estimate? no: run (resumable), then report
    mbb study studies/scarce.yaml --estimate    # tokens, calls, time and cost before it runs
    mbb study studies/local_smoke.yaml --stub   # every model answered by a loopback stub

The file names conditions (any shipped or user params file, used unchanged), models (endpoint,
preset, price with its date and source, limits), roles, seeds, overrides for every condition,
spend caps and failure rules (see `StudySpec`). Each (condition, role, model) is a *cell*: the
condition with the role's workers on that model (`cell_condition`), named
`<condition>.<role>` so that cells never share run ids; a mixed roster is one cell whose seats
name models or personas. Every run of every cell runs on one event loop and one LLM client, so
each endpoint's concurrency and requests/tokens per minute hold across the whole study, and one
replay cache (`<out>/llm_cache.sqlite`) serves them all.

Failures are loud (`mbb.llm.limits`): before anything runs, every model's key variable must be
set and its endpoint must answer one small request (a dead endpoint stops the study with one
line); during the study an endpoint that keeps failing stops the runs that use it, resumable.
Running the same command again skips finished runs and resumes the others from their logs and
the cache. Each run's share of failed or repaired calls is in its `meta.json` (`validity`); a
run above `failures.invalid_share` is marked invalid and left out of comparisons.

The output folder holds one study: `study.json` (what ran), `runs/<cell>/<run_id>/` (events and
meta) with `runs/<cell>/tables/`, the cache and spend ledger, `notebooks/` (the analyses, run
over the runs, never re-running them), `index.html`, `compare.html` and `viewer/`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import difflib
import hashlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mbb.agents.backends import uses_llm
from mbb.agents.personas import PERSONAS
from mbb.batch.build import load_params, run_condition_async
from mbb.batch.outdir import claim, replace_file
from mbb.batch.runner import finished_log, write_meta
from mbb.batch.runs import run_id_of
from mbb.core import safejson
from mbb.core.aio import run_coroutine
from mbb.core.errors import one_line
from mbb.core.eventlog import read_lines
from mbb.core.nested import comparable_params
from mbb.core.paths import (
    PACKAGE_DIR,
    is_bare_name,
    notebook_file,
    params_file,
    study_file,
    user_path,
)
from mbb.core.tables import tables_from_run_dirs, write_tables
from mbb.core.validity import INVALID_SHARE, MAX_INVALID_SHARE, run_validity
from mbb.llm.config import ModelConfig, Price
from mbb.llm.redact import Redactor, key_values
from mbb.params import Condition, ParamsError, deep_merge, safe_yaml

__all__ = [
    "ROLES",
    "Cell",
    "Study",
    "StudyError",
    "StudyInterrupted",
    "StudyOutcome",
    "StudySpec",
    "estimate_study",
    "load_study",
    "run_study",
]

ROLES: dict[str, dict[str, str]] = {  # a role's workers: which backends are LLMs
    "negotiators": {"negotiator": "llm"},
    "solvers": {"solver": "llm"},
    "both": {"negotiator": "llm", "solver": "llm"},
}
DEFAULT_NOTEBOOKS = (
    "compare_conditions",
    "token_audit",
    "taxonomy_audit",
    "transmission",
    "starting_states",
)
STUDY_RECORD = "study.json"
PING_TIMEOUT_S = 20.0  # the preflight's wait per attempt for one small answer


class StudyError(ValueError):
    """A study file or output folder that cannot be used; the message is one line."""


class StudyInterrupted(KeyboardInterrupt):
    """Ctrl-C during a study: `line` says what finished and how to go on."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class StudyPrice(Price):
    """A model's price in a study: USD per 1M tokens, with when and where it was read (both
    required here: a study's cost is only as good as its prices)."""

    date: str = Field(
        pattern=r"^\d{4}-\d{2}(-\d{2})?$", description="When it was read (YYYY-MM-DD)."
    )
    source: str = Field(
        min_length=1, max_length=300, description="Where it was read (a URL or a document)."
    )


class RoleSpec(_Strict):
    """A role given in full: a name, and either the LLM backends of every worker (`negotiator`,
    `solver`) or a `roster` naming, seat by seat, a model of the study or a persona."""

    name: str = Field(pattern=r"^[A-Za-z0-9_]+$", max_length=40)
    negotiator: Literal["llm", "scripted"] = "scripted"
    solver: Literal["llm", "modeled"] = "modeled"
    roster: list[str] | None = None


class Caps(_Strict):
    max_cost_usd: float | None = Field(None, gt=0, description="New LLM spend of the study.")
    max_tokens_total: int | None = Field(None, gt=0, description="Its new tokens.")


class Failures(_Strict):
    stop_after: int = Field(
        3, ge=1, le=100, description="Consecutive failed calls of one endpoint that stop its runs."
    )
    invalid_share: float = Field(
        INVALID_SHARE,
        ge=0,
        le=MAX_INVALID_SHARE,
        description="A run whose failed or repaired calls exceed this share of its calls is "
        "marked invalid and left out of comparisons (at most 0.5: a run whose calls mostly "
        "failed is never a result).",
    )


class StudySpec(_Strict):
    """A study file. Paths are relative to the study file's folder; a bare name is one of mbb's
    own conditions (`base`) or notebooks."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", max_length=100)
    description: str = ""
    out: str | None = Field(
        None, description="Output folder (default: outputs/studies/<name> in the current folder)."
    )
    conditions: list[str] = Field(min_length=1, description="Params files or mbb's names.")
    models: dict[str, dict[str, Any]] = Field(
        min_length=1,
        description="Model slots: a model config (mbb.llm.config.ModelConfig: model, preset, "
        "base_url, api_key_env, options, concurrency, rpm, tpm) plus `price` (StudyPrice, or "
        "'unpriced').",
    )
    roles: list[str | RoleSpec] = Field(
        default_factory=lambda: list[str | RoleSpec](["negotiators"]),
        min_length=1,
        description="negotiators | solvers | both, or a RoleSpec (e.g. a mixed roster).",
    )
    seeds: str | list[int] = Field("0..3", description="A..B (inclusive), or a list.")
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="Deep-merged into every condition (e.g. subruns: 1)."
    )
    caps: Caps = Field(default_factory=Caps)
    failures: Failures = Field(default_factory=Failures)
    notebooks: list[str] = Field(
        default_factory=lambda: list(DEFAULT_NOTEBOOKS),
        description="Analysis notebooks run over the study's runs ([] for none).",
    )
    runs_at_once: int | None = Field(
        None, ge=1, le=10_000, description="Runs in flight (default: all; real tasks: CPUs)."
    )

    @field_validator("roles")
    @classmethod
    def _known_roles(cls, v: list[str | RoleSpec]) -> list[str | RoleSpec]:
        for r in v:
            if isinstance(r, str) and r not in ROLES:
                raise ValueError(
                    f"unknown role {r!r}; valid: {', '.join(ROLES)} or a mapping "
                    "{name: ..., roster: [...]}"
                )
        names = [r if isinstance(r, str) else r.name for r in v]
        if len(names) != len(set(names)):
            raise ValueError(f"role names must be unique, got {names}")
        return v

    @field_validator("notebooks")
    @classmethod
    def _known_notebooks(cls, v: list[str]) -> list[str]:
        # checked when the file is read: a misspelled name was found only after every run
        # (every call paid for), and the study still ended with exit 0
        for name in v:
            try:
                notebook_file(name)
            except FileNotFoundError as exc:
                raise ValueError(" ".join(str(exc).split())) from None
        return v


@dataclass(frozen=True)
class Cell:
    """One (condition, role, model) of a study: its condition and where its runs go."""

    condition_file: str
    role: str
    model: str | None  # the model slot; None for a roster (its seats name them)
    condition: Condition = field(repr=False)
    folder: Path

    @property
    def label(self) -> str:
        return self.folder.name


@dataclass(frozen=True)
class Study:
    """A loaded study: its spec, model configs and prices by slot, cells, seeds and folder."""

    spec: StudySpec
    source: Path
    out: Path
    configs: dict[str, ModelConfig]
    prices: dict[str, StudyPrice | None]
    cells: list[Cell]
    seeds: list[int]
    stub: bool = False  # every model answered by the loopback stub (`--stub`)

    @property
    def runs(self) -> int:
        return len(self.cells) * len(self.seeds)

    def fingerprint(self) -> str:
        """What identifies the study: its name, whether it is a stub, and each cell's
        condition (seeds may grow)."""
        blob = json.dumps(
            {
                "name": self.spec.name,
                "stub": self.stub,
                "cells": {
                    c.label: comparable_params(c.condition.model_dump(mode="json"))
                    for c in self.cells
                },
            },
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# --- loading -------------------------------------------------------------------------------------
def _seeds(spec: StudySpec) -> list[int]:
    s = spec.seeds
    if isinstance(s, list):
        if not s or any(x < 0 for x in s) or len(set(s)) != len(s):
            raise StudyError(f"seeds: a list of distinct seeds >= 0, got {s}")
        return sorted(s)
    a, _, b = s.partition("..")
    try:
        lo, hi = int(a), int(b or a)
    except ValueError:
        raise StudyError(f"seeds: A..B or a list of seeds, got {s!r}") from None
    if not 0 <= lo <= hi or hi - lo >= 100_000:
        raise StudyError(f"seeds: need 0 <= A <= B (at most 100000 seeds), got {s!r}")
    return list(range(lo, hi + 1))


def _problem(where: str, exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """One line naming the first invalid field of `exc` under `where`; for an unknown field of
    `model` (the class validated), the field it most resembles ("did you mean `seeds`?") and
    the fields allowed there."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    field_ = f"{where}.{loc}" if loc else where
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
        allowed = _fields_at(model, err["loc"][:-1])
        if allowed:
            close = difflib.get_close_matches(str(err["loc"][-1]), allowed, n=1, cutoff=0.6)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            msg += f"{hint} (allowed here: {', '.join(sorted(allowed))})"
    return f"{field_}: {' '.join(msg.split())}"


def _fields_at(model: type[BaseModel] | None, loc: Sequence[Any]) -> list[str]:
    """The field names of the pydantic model reached from `model` along `loc` (nested models
    only; [] where the path leaves them, e.g. through a mapping)."""
    for part in loc:
        if model is None or not isinstance(part, str) or part not in model.model_fields:
            return []
        ann = model.model_fields[part].annotation
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    return list(model.model_fields) if model is not None else []


def _models(
    spec: StudySpec, stub: bool
) -> tuple[dict[str, ModelConfig], dict[str, StudyPrice | None]]:
    """Each slot's model config and price. A slot still to fill in (`fill_in: <what>`) is an
    error naming what it wants, except under `stub`, where it is a stub of its preset."""
    configs: dict[str, ModelConfig] = {}
    prices: dict[str, StudyPrice | None] = {}
    for slot, entry in spec.models.items():
        if not isinstance(entry, Mapping):
            raise StudyError(f"models.{slot}: a model config mapping, got {type(entry).__name__}")
        data = dict(entry)
        if "fill_in" in data:
            if not stub:
                raise StudyError(
                    f"models.{slot}: a slot to fill in ({' '.join(str(data['fill_in']).split())})"
                    ": replace `fill_in` with the model's `model`, `preset` (or `base_url`), "
                    "`api_key_env` and `price`; or try the study with --stub"
                )
            data = {k: v for k, v in data.items() if k not in ("fill_in", "price")}
            data.update(model=slot, price="unpriced")
            data.setdefault("preset", "openai")
        if stub:  # named as a stub everywhere (tables, report, viewer): never taken for the model
            data["model"] = f"stub-{slot}"
        price = data.pop("price", None)
        if price is None:
            raise StudyError(
                f"models.{slot}.price: give the model's price (prompt, completion, "
                "cached_prompt, date, source) or `price: unpriced`"
            )
        try:
            configs[slot] = ModelConfig.model_validate(data)
        except ValidationError as exc:  # a preset's refusal too (one line)
            raise StudyError(_problem(f"models.{slot}", exc, ModelConfig)) from None
        try:
            prices[slot] = None if price == "unpriced" else StudyPrice.model_validate(price)
        except ValidationError as exc:
            raise StudyError(_problem(f"models.{slot}.price", exc, StudyPrice)) from None
    return configs, prices


def _roles(spec: StudySpec, slots: Sequence[str]) -> list[RoleSpec]:
    out = []
    for r in spec.roles:
        if isinstance(r, str):
            role = ROLES[r]
            out.append(
                RoleSpec(
                    name=r,
                    negotiator="llm" if role.get("negotiator") == "llm" else "scripted",
                    solver="llm" if role.get("solver") == "llm" else "modeled",
                )
            )
            continue
        if r.roster is not None:
            valid = [*slots, *PERSONAS.names()]
            bad = [x for x in r.roster if x not in valid]
            if bad:
                raise StudyError(
                    f"roles.{r.name}.roster: unknown {bad}; a seat names a model of the study "
                    f"({', '.join(slots)}) or a persona ({', '.join(PERSONAS.names())})"
                )
        out.append(r)
    return out


def _resolve(path_or_name: str, base: Path) -> Path:
    if is_bare_name(path_or_name):
        try:
            return params_file(path_or_name)
        except FileNotFoundError as exc:
            raise StudyError(f"conditions: {exc}") from None
    p = Path(path_or_name)
    p = p if p.is_absolute() else base / p
    if not p.is_file():
        raise StudyError(f"conditions: no such params file {str(p)!r}")
    return p


def cell_condition(
    file: Path,
    role: RoleSpec,
    slot: str | None,
    spec: StudySpec,
    configs: Mapping[str, ModelConfig],
    prices: Mapping[str, StudyPrice | None],
    cache_file: Path,
) -> Condition:
    """The condition of one cell: the params file as it is, the study's overrides, the role's
    workers on the model `slot` (or the roster's seats), the study's model configs and prices,
    the study's cache; named `<condition>.<role>`."""
    try:
        base = load_params(file, spec.overrides or None)
    except ParamsError as exc:  # the study's overrides, not the params file, are at fault
        raise StudyError(f"overrides (the study's, applied to {file}): {exc}") from None
    workers: dict[str, Any] = {}
    used: set[str] = set()
    if role.roster is not None:
        if len(role.roster) != base.workers.count:
            raise StudyError(
                f"roles.{role.name}.roster: {len(role.roster)} seats for condition "
                f"{base.name!r} with {base.workers.count} workers"
            )
        seats = {}
        for i, seat in enumerate(role.roster):
            if seat in configs:
                seats[f"W{i + 1}"] = {"negotiator": "llm", "model": seat}
                used.add(seat)
            else:
                seats[f"W{i + 1}"] = {"negotiator": "scripted", "persona": seat}
        workers["overrides"] = seats
    else:
        assert slot is not None
        workers["model"] = slot
        used.add(slot)
        if role.negotiator == "llm":
            workers["negotiator"] = "llm"
    if role.solver == "llm":
        workers["solver"] = "llm"
    tasks = {"kind": "real"} if role.solver == "llm" else {}
    over: dict[str, Any] = {
        "name": f"{base.name}.{role.name}",
        "workers": workers,
        "models": {s: configs[s].model_dump(mode="json") for s in sorted(used)},
        "prices": {
            configs[s].model: p.model_dump() for s in sorted(used) if (p := prices[s]) is not None
        },
        "llm": {"cache_file": str(cache_file), "cache": "read_write"},
    }
    if tasks:
        over["tasks"] = tasks
    try:
        return load_params(file, deep_merge(spec.overrides, over))
    except ParamsError as exc:
        raise StudyError(f"cell {base.name}.{role.name}[{slot or 'roster'}]: {exc}") from None


def load_study(path: str | Path, *, stub: bool = False, out: str | Path | None = None) -> Study:
    """Read, validate and expand a study file (every cell's condition is loaded and checked);
    raises StudyError (one line naming the field and what is valid). `stub`: every model is to
    be answered by the loopback stub (`run_study` serves it): slots still to fill in are
    allowed, models are named `stub-<slot>`, and the default output folder is
    `outputs/studies/<name>-stub`, so a stub study is never taken for the real one. `out`:
    the output folder, instead of the file's `out` (relative to the study file's folder) or
    the default `outputs/studies/<name>` (relative to the current directory)."""
    try:
        src = study_file(path)
    except FileNotFoundError as exc:
        raise StudyError(str(exc)) from None
    if src.is_dir():
        raise StudyError(f"{src}: a folder, not a study file (name its .yaml file)")
    if not src.is_file():
        raise StudyError(f"{src}: no such study file")
    try:
        data = safe_yaml(src.read_text(encoding="utf-8"))
    except Exception as exc:
        why = " ".join(str(exc).split())[:300]
        raise StudyError(f"{src}: not a valid YAML study file: {why}") from None
    if not isinstance(data, dict):
        raise StudyError(f"{src}: the top level must be a mapping of fields")
    if "conditions" not in data and {"extends", "workers", "mechanism", "subruns"} & set(data):
        raise StudyError(
            f"{src}: a condition's params file, not a study file: run it with `mbb run FILE`, "
            "or name it under `conditions:` in a study file"
        )
    try:
        spec = StudySpec.model_validate(data)
    except ValidationError as exc:
        raise StudyError(f"{src}: {_problem('', exc, StudySpec).lstrip('.')}") from None
    try:
        configs, prices = _models(spec, stub)
        roles = _roles(spec, list(configs))
        seeds = _seeds(spec)
        if out is not None:
            folder = user_path(out)
        elif spec.out:
            given = Path(spec.out).expanduser()
            folder = (given if given.is_absolute() else src.parent / given).resolve()
        else:
            folder = user_path(f"outputs/studies/{spec.name}" + ("-stub" if stub else ""))
        cache_file = folder / "llm_cache.sqlite"
        if spec.caps.max_cost_usd is not None:
            unpriced = [s for s, p in prices.items() if p is None]
            if unpriced:
                raise StudyError(
                    f"caps.max_cost_usd: the models {unpriced} have no price, so spend on them "
                    "cannot be capped; give their prices or drop the cap"
                )
        cells = []
        for cond in spec.conditions:
            file = _resolve(cond, src.parent)
            for role in roles:
                slots: list[str | None] = [None] if role.roster is not None else list(configs)
                for slot in slots:
                    c = cell_condition(file, role, slot, spec, configs, prices, cache_file)
                    runs = folder / "runs" / (c.name + (f"-{slot}" if slot else "-roster"))
                    cells.append(Cell(str(file), role.name, slot, c, runs))
    except StudyError as exc:
        raise StudyError(f"{src}: {exc}") from None
    labels = Counter(c.condition.name for c in cells if c.model is None)
    if any(n > 1 for n in labels.values()):
        raise StudyError(f"{src}: two conditions share a name: {dict(labels)}")
    return Study(spec, src, folder, configs, prices, cells, seeds, stub)


# --- the output folder ---------------------------------------------------------------------------
def _claim_study(study: Study) -> None:
    """The output folder holds this study or nothing: another study, or anything else, is
    refused before anything is written."""
    out = study.out
    record = out / STUDY_RECORD
    if record.is_file():
        try:
            held = safejson.loads(safejson.read_text(record))
            if not isinstance(held, dict) or not isinstance(held.get("runs", {}), dict):
                raise ValueError("not an object")
        except safejson.TooLarge as exc:
            raise StudyError(f"{exc}; choose another out") from None
        except ValueError:
            raise StudyError(
                f"{record}: not a study record (corrupt); choose another out"
            ) from None
        if held.get("name") != study.spec.name or held.get("fingerprint") != study.fingerprint():
            raise StudyError(
                f"{out} holds study {held.get('name')!r} with other cells or parameters; a "
                "study folder holds one study: choose another `out`"
            )
    elif out.exists() and any(out.iterdir()):
        raise StudyError(f"{out} is not empty and holds no study; choose another `out`")


def _write_record(study: Study, runs: Mapping[str, dict[str, Any]], extra: dict[str, Any]) -> None:
    red = _secrets(study)
    runs = {
        k: {**r, "error": red.text(r["error"])} if isinstance(r.get("error"), str) else r
        for k, r in runs.items()
    }
    record = {
        "name": study.spec.name,
        "fingerprint": study.fingerprint(),
        "source": str(study.source),
        "seeds": study.seeds,
        "models": {
            s: {
                "model": c.model,
                "base_url": c.base_url,
                "preset": c.preset,
                "price": None if study.prices[s] is None else study.prices[s].model_dump(),  # type: ignore[union-attr]
            }
            for s, c in study.configs.items()
        },
        "cells": [
            {
                "folder": str(c.folder.relative_to(study.out)),
                "condition": Path(c.condition_file).stem,
                "role": c.role,
                "model": c.model,
                "name": c.condition.name,
            }
            for c in study.cells
        ],
        "runs": dict(sorted(runs.items())),
        **extra,
    }
    replace_file(study.out / STUDY_RECORD, json.dumps(record, indent=1))  # never via a link


# --- running -------------------------------------------------------------------------------------
@dataclass
class StudyOutcome:
    """How a study invocation ended."""

    runs: int = 0
    done_before: int = 0
    completed: int = 0
    stopped: int = 0
    failed: int = 0
    invalid: int = 0
    calls: int = 0
    failed_calls: int = 0
    calls_without_usage: int = 0  # answers whose endpoint reported no token counts
    calls_implausible_usage: int = 0  # of them: counts that cannot be true (not taken)
    endpoints_down: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    report: Path | None = None
    notebooks_failed: list[str] = field(default_factory=list)

    @property
    def status(self) -> int:
        """Exit status: 0 all finished and analysed, 3 stopped (resumable), 1 a run failed,
        4 the runs finished but an analysis notebook failed (a script must not take the
        report for complete)."""
        return 1 if self.failed else 3 if self.stopped else 4 if self.notebooks_failed else 0


def _state(run_dir: Path) -> tuple[Literal["done", "resume", "fresh"], list[str] | None]:
    """(whether a run finished, is to be resumed from its log, or starts afresh; the finished
    run's lines). Reads only, but for a finished run's missing meta.json (`finished_log`)."""
    lines = finished_log(run_dir)
    if lines is not None:
        return "done", lines
    path = run_dir / "events.jsonl"
    if not path.is_file() or path.stat().st_size == 0:
        return "fresh", None
    return "resume", None


def _key_variables(study: Study) -> list[str]:
    """The key variables the study's models name: their values are redacted from whatever an
    endpoint sends back before anything is written."""
    return sorted(
        {m.api_key_env for c in study.cells for m in c.condition.models.values() if m.api_key_env}
    )


def _secrets(study: Study) -> Redactor:
    """The study's keys (the values of its key variables), to cut out of every error text it
    prints or writes: a second layer behind the provider's own redaction (F1 of red team
    rt37)."""
    return Redactor(key_values(_key_variables(study)))


def _reopen(run_dir: Path) -> None:
    """A stopped or failed run goes on from just before its `run_ended` (the log is checked)."""
    path = run_dir / "events.jsonl"
    lines = read_lines(path)
    if lines and json.loads(lines[-1]).get("kind") == "run_ended":
        replace_file(path, "".join(x + "\n" for x in lines[:-1]))  # never through a link


def preflight(study: Study, environ: Mapping[str, str] | None = None) -> list[str]:
    """Every model's key variable is set and its endpoint answers one small request: the
    problems, one line each (empty: all good). Costs one short call per model."""
    from mbb.llm.client import LlmClient
    from mbb.llm.types import ChatRequest

    env = os.environ if environ is None else environ
    unset: dict[str, list[str]] = {}  # a variable, the models that need it
    for slot, cfg in study.configs.items():
        # empty or blank is no key either (a key of one space passed this check)
        if cfg.api_key_env and not env.get(cfg.api_key_env, "").strip():
            unset.setdefault(cfg.api_key_env, []).append(f"{slot}: {cfg.model}")
    if unset:  # all at once: mending one at a time cost a start of the study each
        which = " and ".join(
            f"{var} (model{'s' * (len(w) > 1)} {', '.join(w)})" for var, w in unset.items()
        )
        exports = "; ".join(f"export {var}=..." for var in unset)
        return [
            f"environment variable{'s' * (len(unset) > 1)} {which} not set, or empty, for "
            f"mbb: a shell variable must be exported (`{exports}` in the shell that runs mbb)"
        ]

    async def ping() -> list[str]:
        # a Retry-After longer than one attempt's wait fails the check at once
        client = LlmClient(
            stop_after=1, secret_envs=_key_variables(study), max_retry_after_s=PING_TIMEOUT_S
        )
        req = ChatRequest(messages=[{"role": "user", "content": "Reply with OK."}])

        async def one(slot: str, cfg: ModelConfig) -> str | None:
            # 20 s per attempt, one retry: a silent endpoint is given up on in about 45 s
            quick = cfg.model_copy(update={"max_retries": 1, "timeout_s": PING_TIMEOUT_S})
            try:
                await client.complete(quick, req)
            except Exception as exc:
                why = one_line(client.redactor.text(str(exc)) or "")
                return f"model {slot} ({cfg.model} at {cfg.base_url}) does not answer: {why}"
            return None

        try:  # every model at once: the wait is the slowest endpoint's, not their sum
            found = await asyncio.gather(*(one(s, c) for s, c in study.configs.items()))
        finally:
            await client.aclose()
        return [f for f in found if f is not None]

    box: list[list[str]] = []

    async def go() -> None:
        box.append(await ping())

    run_coroutine(go)
    return box[0]


class _Progress:
    """Runs finished and calls made, shown per call (a tqdm bar, or nothing). The bar is
    redrawn at most every `_REDRAW_S` on a terminal and every `_LOG_S` into a file or pipe, so
    a log of thousands of calls stays readable."""

    _REDRAW_S, _LOG_S, _RETRY_LINE_S = 0.25, 30.0, 30.0

    def __init__(self, total: int, enabled: bool) -> None:
        self.calls = self.failed = self.without_usage = self.implausible = 0
        self._retries: dict[str, int] = {}  # per endpoint, since its last line
        self._retry_said: dict[str, float] = {}
        self.bar: Any = None
        self.redactor = Redactor()  # the study's keys, cut out of a retry line (`_run_all`)
        self._every = self._REDRAW_S if sys.stderr.isatty() else self._LOG_S
        self._drawn = 0.0
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=total, desc="study", unit="run", file=sys.stderr, mininterval=self._every
            )

    def call(self, meta: Any, result: Any, error: str | None) -> None:
        self.calls += 1
        self.failed += error is not None
        usage = getattr(result, "usage", None)
        self.without_usage += error is None and usage is not None and not usage.reported
        self.implausible += error is None and usage is not None and usage.implausible
        if self.bar is not None:
            self.bar.set_postfix_str(f"{self.calls} calls, {self.failed} failed", refresh=False)
            now = time.monotonic()
            if now - self._drawn >= self._every:
                self._drawn = now
                self.bar.refresh()

    def retry(self, config: Any, why: str, wait_s: float, attempt: int, allowed: int) -> None:
        """A line when a call of an endpoint failed and will be tried again: an endpoint that
        holds its answers (no answer in timeout_s, a long Retry-After) kept the bar still for
        minutes with no word (a red team's find). At most one line per endpoint every
        `_RETRY_LINE_S`, counting the retries it stands for."""
        if self.bar is None:
            return
        key = f"{config.model} at {config.base_url}"
        self._retries[key] = self._retries.get(key, 0) + 1
        now = time.monotonic()
        if now - self._retry_said.get(key, -self._RETRY_LINE_S) < self._RETRY_LINE_S:
            return
        n, self._retries[key], self._retry_said[key] = self._retries[key], 0, now
        more = f"; {n} calls retried since the last such line" if n > 1 else ""
        why = one_line(self.redactor.text(why) or "", 200)
        self.bar.write(
            f"retrying {key}: {why} (attempt {attempt} of {allowed} "
            f"failed; next in {wait_s:.0f} s{more})",
            file=sys.stderr,
        )

    def run_done(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.refresh()  # the final counts, whatever the last redraw showed
            self.bar.close()


async def _run_all(
    study: Study,
    todo: list[tuple[Cell, int, bool]],
    progress: _Progress,
    outcome: StudyOutcome,
    records: dict[str, dict[str, Any]],
) -> None:
    from mbb.llm.budget import SpendLedger
    from mbb.llm.cache import LlmCache
    from mbb.llm.client import LlmClient

    spec = study.spec
    budget = None
    if spec.caps.max_cost_usd is not None or spec.caps.max_tokens_total is not None:
        budget = SpendLedger(
            spec.caps.max_cost_usd, spec.caps.max_tokens_total, study.out / "spend.sqlite"
        )
    client = LlmClient(
        prices={m: p for c in study.cells for m, p in c.condition.prices.items()},
        budget=budget,
        stop_after=spec.failures.stop_after,
        stop_share=spec.failures.invalid_share,  # an endpoint failing that often stops (F8)
        on_call=progress.call,
        secret_envs=_key_variables(study),
        on_retry=progress.retry,
    )
    progress.redactor = client.redactor
    cache = LlmCache(study.out / "llm_cache.sqlite", "read_write")
    at_once = spec.runs_at_once or (
        max(1, len(os.sched_getaffinity(0)))
        if any(c.condition.tasks.kind == "real" for c in study.cells)
        else 10_000
    )
    gate = asyncio.Semaphore(at_once)

    async def one(cell: Cell, seed: int, resume: bool) -> None:
        rid = run_id_of(cell.condition, seed)
        async with gate:
            t0 = time.perf_counter()
            try:
                result = await run_condition_async(
                    cell.condition, seed, cell.folder, resume=resume, llm=(client, cache)
                )
            except Exception as exc:
                outcome.failed += 1
                said = client.redactor.text(str(exc)) or ""
                records[rid] = {"cell": cell.label, "status": "failed", "error": said[:500]}
                outcome.errors.append(f"{rid}: {type(exc).__name__}: {said}")
                progress.run_done()
                return
            validity = run_validity(result.log.lines, spec.failures.invalid_share)
            write_meta(
                result, cell.condition, time.perf_counter() - t0, spec.failures.invalid_share
            )
            rec: dict[str, Any] = {"cell": cell.label, "status": result.status, **validity}
            if result.status == "stopped":
                outcome.stopped += 1
                rec["error"] = client.redactor.text(result.error)
            else:
                outcome.completed += 1
                outcome.invalid += not validity["valid"]
            records[rid] = rec
            progress.run_done()

    try:
        await asyncio.gather(*(one(c, s, r) for c, s, r in todo))
    finally:
        outcome.endpoints_down = dict(client.breaker.down)
        outcome.calls, outcome.failed_calls = progress.calls, progress.failed
        outcome.calls_without_usage = progress.without_usage
        outcome.calls_implausible_usage = progress.implausible
        await client.aclose()
        cache.close()


@contextlib.contextmanager
def _stubbed(study: Study) -> Iterator[Study]:
    """The study with every model answered by the loopback stub (`mbb.testing.stub`)."""
    from mbb.testing.stub import stub_endpoint

    with stub_endpoint(study.configs) as url:
        configs = {
            s: c.model_copy(update={"base_url": url, "api_key_env": None})
            for s, c in study.configs.items()
        }
        cells = []
        for c in study.cells:
            data = c.condition.model_dump(mode="json")
            for m in data["models"].values():
                m.update(base_url=url, api_key_env=None)
            cells.append(
                Cell(c.condition_file, c.role, c.model, Condition.model_validate(data), c.folder)
            )
        yield dataclasses.replace(study, configs=configs, cells=cells)


def run_study(
    study: Study,
    *,
    progress: bool = True,
    report: bool = True,
    cluster: Any = None,
    workers: int = 2,
    say: Callable[[str], None] = print,
    reanalyse: bool = False,
) -> StudyOutcome:
    """Run every unfinished run of `study`, then its analyses and report (see the module
    docstring); a stub study (`load_study(..., stub=True)`) is answered by the loopback stub
    (no keys, no network). `progress`: a bar with the calls made; `report`: run the analysis
    notebooks and write the report and viewer; `cluster`: None (this process), "dask" (a
    Dask LocalCluster of `workers` processes), a scheduler address or a Dask cluster object:
    the cells are spread over its workers, each endpoint's limits shared among the processes
    that call it; `say`: where one-line messages go; `reanalyse`: run the notebooks even
    when nothing they read has changed since the last analysis."""
    _claim_study(study)
    t0 = time.perf_counter()
    outcome = StudyOutcome(runs=study.runs)
    todo, judged = _plan(study, outcome)
    if todo and not study.stub and any(uses_llm(c.condition) for c in study.cells):
        problems = preflight(study)  # before anything is written
        if problems:  # every one named: mending one at a time cost a run of the study each
            raise StudyError(f"{'; '.join(problems)}; nothing was run")
    study.out.mkdir(parents=True, exist_ok=True)
    record_path = study.out / STUDY_RECORD
    records: dict[str, dict[str, Any]] = {}
    if record_path.is_file():
        records = safejson.loads(safejson.read_text(record_path)).get("runs", {})  # claimed
    records.update(judged)  # a finished run's record is its log's verdict, never the old one
    _write_record(study, records, {"status": "running"})
    interrupted = False
    try:
        if cluster is None:
            with contextlib.ExitStack() as stack:
                run = stack.enter_context(_stubbed(study)) if study.stub else study
                cells = {c.label: c for c in run.cells}
                _execute(
                    run, [(cells[c.label], s, r) for c, s, r in todo], progress, outcome, records
                )
        else:
            _execute_on_dask(study, todo, cluster, workers, outcome, records)
    except KeyboardInterrupt:
        interrupted = True
        ended = sum(1 for c, s, _ in todo if run_id_of(c.condition, s) in records)
        raise StudyInterrupted(
            f"interrupted: {outcome.done_before + ended} of {study.runs} runs finished, the "
            f"others resumable: run the same command again (study {study.out})"
        ) from None
    finally:
        for cell, seed, _ in todo:  # what did not end is to be resumed, and says so
            records.setdefault(run_id_of(cell.condition, seed), {"cell": cell.label})
            records[run_id_of(cell.condition, seed)].setdefault("status", "interrupted")
        status = "interrupted" if interrupted else "stopped" if outcome.stopped else "done"
        _write_record(study, records, {"status": status})
    red = _secrets(study)
    for endpoint, why in outcome.endpoints_down.items():
        why = one_line(red.text(why) or "", 600)
        say(
            f"stopped: endpoint {endpoint} is down ({why}); its runs are resumable: run the "
            "same command again once it answers"
        )
    if report and not outcome.stopped:
        outcome.report, outcome.notebooks_failed = analyse_study(
            study, say=say, progress=progress, again=reanalyse
        )
    outcome.seconds = time.perf_counter() - t0
    return outcome


def _plan(
    study: Study, outcome: StudyOutcome
) -> tuple[list[tuple[Cell, int, bool]], dict[str, dict[str, Any]]]:
    """(the runs still to make: (cell, seed, resume from its log); the records of the finished
    ones, judged from their logs). Finished runs are counted, the invalid ones too: a record or
    meta.json left in the folder never says how many of a run's calls failed."""
    todo, judged = [], {}
    for cell in study.cells:
        for seed in study.seeds:
            rid = run_id_of(cell.condition, seed)
            state, lines = _state(cell.folder / rid)
            if lines is not None:
                outcome.done_before += 1
                validity = run_validity(lines, study.spec.failures.invalid_share)
                outcome.invalid += not validity["valid"]
                judged[rid] = {"cell": cell.label, "status": "completed", **validity}
            else:
                todo.append((cell, seed, state == "resume"))
    return todo, judged


def _execute(
    study: Study,
    todo: list[tuple[Cell, int, bool]],
    progress: bool,
    outcome: StudyOutcome,
    records: dict[str, dict[str, Any]],
) -> None:
    """Make the runs `todo` on one event loop (their cells' folders held), then write each
    touched cell's tables."""
    cells = {c.label: c for c, _, _ in todo}
    with contextlib.ExitStack() as folders:
        for cell in cells.values():
            folders.enter_context(claim(cell.folder, cell.condition))
        for cell, seed, resume in todo:
            if resume:
                _reopen(cell.folder / run_id_of(cell.condition, seed))
        bar = _Progress(len(todo), progress and bool(todo))
        try:
            run_coroutine(lambda: _run_all(study, todo, bar, outcome, records))
        finally:
            bar.close()
        for cell in cells.values():
            done = [
                cell.folder / run_id_of(cell.condition, s)
                for s in study.seeds
                if finished_log(cell.folder / run_id_of(cell.condition, s)) is not None
            ]
            if done:
                write_tables(tables_from_run_dirs(done), cell.folder / "tables")


def _endpoint_key(cfg: dict[str, Any]) -> str:
    """An endpoint as the limits name it (`model at base_url`)."""
    return f"{cfg.get('model')} at {cfg.get('base_url')}"


def _share_limits(study: Study, shares: dict[str, int]) -> Study:
    """The study with each endpoint's concurrency and per-minute limits divided by its entry
    in `shares` (the number of processes that call it at once; 1 when absent)."""

    def split(cfg: dict[str, Any]) -> dict[str, Any]:
        out = dict(cfg)
        n = shares.get(_endpoint_key(cfg), 1)
        for key in ("concurrency", "rpm", "tpm"):
            if out.get(key) is not None:
                out[key] = max(1, out[key] // n)
        return out

    configs = {
        s: ModelConfig.model_validate(split(c.model_dump())) for s, c in study.configs.items()
    }
    cells = []
    for c in study.cells:
        data = c.condition.model_dump(mode="json")
        data["models"] = {k: split(v) for k, v in data["models"].items()}
        cells.append(
            Cell(c.condition_file, c.role, c.model, Condition.model_validate(data), c.folder)
        )
    return dataclasses.replace(study, configs=configs, cells=cells)


def _dask_group(
    source: str,
    out: str,
    labels: list[str],
    runs: list[tuple[str, int, bool]],
    shares: dict[str, int],
    stub: bool,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """One Dask task: load the study, keep its cells `labels`, share the endpoints' limits
    (`shares`, see `_share_limits`) and make the runs `runs`."""
    study = load_study(source, stub=stub, out=out)
    keep = [c for c in study.cells if c.label in labels]
    study = _share_limits(dataclasses.replace(study, cells=keep), shares)
    outcome = StudyOutcome(runs=len(runs))
    records: dict[str, dict[str, Any]] = {}
    with contextlib.ExitStack() as stack:
        run = stack.enter_context(_stubbed(study)) if study.stub else study
        cells = {c.label: c for c in run.cells}
        _execute(run, [(cells[lab], s, r) for lab, s, r in runs], False, outcome, records)
    counts = {
        k: getattr(outcome, k) for k in ("completed", "stopped", "failed", "invalid", "calls")
    }
    counts["failed_calls"] = outcome.failed_calls
    counts["calls_without_usage"] = outcome.calls_without_usage
    counts["calls_implausible_usage"] = outcome.calls_implausible_usage
    counts["endpoints_down"] = outcome.endpoints_down
    counts["errors"] = outcome.errors
    return counts, records


def _execute_on_dask(
    study: Study,
    todo: list[tuple[Cell, int, bool]],
    cluster: Any,
    workers: int,
    outcome: StudyOutcome,
    records: dict[str, dict[str, Any]],
) -> None:
    """Spread the cells of `todo` over a Dask cluster's workers (as `mbb sweep` does)."""
    from distributed import Client, LocalCluster

    own = None
    if cluster in ("dask", "local"):
        own = LocalCluster(
            n_workers=max(1, workers), threads_per_worker=1, processes=True, dashboard_address=None
        )
        client = Client(own)
    else:
        client = Client(cluster)
    try:
        n = max(1, len(client.scheduler_info().get("workers", {})) or workers)
        by_cell: dict[str, list[tuple[str, int, bool]]] = {}
        for cell, seed, resume in todo:
            by_cell.setdefault(cell.label, []).append((cell.label, seed, resume))
        groups: list[list[str]] = [[] for _ in range(min(n, len(by_cell)) or 1)]
        for i, label in enumerate(sorted(by_cell)):
            groups[i % len(groups)].append(label)
        cells = {c.label: c for c in study.cells}
        shares: dict[str, int] = {}
        for g in groups:
            used = {
                _endpoint_key(cfg)
                for lab in g
                for cfg in cells[lab].condition.model_dump(mode="json")["models"].values()
            }
            for key in used:
                shares[key] = shares.get(key, 0) + 1
        futures = [
            client.submit(
                _dask_group,
                str(study.source),
                str(study.out),
                g,
                [r for lab in g for r in by_cell[lab]],
                shares,
                study.stub,
                pure=False,
            )
            for g in groups
            if g
        ]
        for fut in futures:
            counts, recs = fut.result()
            records.update(recs)
            for k in (
                "completed",
                "stopped",
                "failed",
                "invalid",
                "calls",
                "failed_calls",
                "calls_without_usage",
                "calls_implausible_usage",
            ):
                setattr(outcome, k, getattr(outcome, k) + counts[k])
            outcome.endpoints_down.update(counts["endpoints_down"])
            outcome.errors.extend(counts["errors"])
    finally:
        client.close()
        if own is not None:
            own.close()


ANALYSIS_RECORD = "analysis.json"  # what the last analysis read and wrote: `_stamps`
# what an analysis writes into the study's folder (everything else there is what it reads)
_ANALYSIS_OUTPUTS = ("index.html", "compare.html", "compare", "viewer", "notebooks")
_RECORDS = (STUDY_RECORD, ANALYSIS_RECORD)  # the study's own bookkeeping, read by no analysis
_MAX_RECORD_BYTES = 1 << 16  # a larger analysis.json is not mbb's: not read, never trusted


def _stamps(digest: Any, root: Path, files: Iterator[Path]) -> None:
    """Each regular file's path (relative to `root`: one folder named two ways is one
    folder), size and modification time, into `digest`, in path order."""
    for f in sorted(files):
        if f.is_file() and not f.is_symlink():
            st = f.stat()
            digest.update(f"{f.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())


def _analysis_inputs(study: Study) -> str:
    """A digest of everything the analyses read: every file of the study's folder but what
    the analysis writes (`_ANALYSIS_OUTPUTS`), the records and the derived `tables/` (the
    report reads any run under the folder, not only `runs/`), the notebooks and mbb's own
    files, each by path, size and modification time (as `make` judges), and the notebooks'
    order. Equal digests: a second analysis would write the same report. mbb's choice: by
    stamps, not contents, so that a study of thousands of runs is judged in milliseconds; a
    file rewritten with the same size in the same nanosecond is missed."""
    digest = hashlib.sha256(json.dumps(list(study.spec.notebooks)).encode())
    out = study.out

    def read(f: Path) -> bool:
        parts = f.relative_to(out).parts
        skip = parts[0] in _ANALYSIS_OUTPUTS or parts[0] in _RECORDS or "tables" in parts
        return not skip and not parts[-1].startswith(".")  # nor a file being written

    _stamps(digest, out, (f for f in out.rglob("*") if read(f)))
    nbs = [notebook_file(n) for n in study.spec.notebooks]
    _stamps(digest, Path("/"), (f.resolve() for f in nbs))
    package = (f for f in PACKAGE_DIR.rglob("*") if "__pycache__" not in f.parts)
    _stamps(digest, PACKAGE_DIR, package)
    return digest.hexdigest()


def _analysis_outputs(study: Study) -> str:
    """A digest of what the analysis wrote (`_ANALYSIS_OUTPUTS`): a page deleted or edited
    since is written again (the comparison's CSVs, the viewer's data, a notebook's page)."""
    digest = hashlib.sha256()
    for name in _ANALYSIS_OUTPUTS:
        path = study.out / name
        _stamps(digest, study.out, iter([path, *(path.rglob("*") if path.is_dir() else [])]))
    return digest.hexdigest()


def _analysis_current(study: Study, inputs: str) -> bool:
    """The last analysis read these inputs, every notebook of it ran, and what it wrote is
    still there, unchanged."""
    path = study.out / ANALYSIS_RECORD
    try:  # a received folder's record is never trusted further than this comparison
        if path.lstat().st_size > _MAX_RECORD_BYTES:
            return False
    except OSError:
        return False
    # a link, a pipe, not JSON, not an object: None, and the notebooks run again
    try:
        last = safejson.read_object(path) or {}
    except safejson.TooLarge:  # grown past the check above
        return False
    return (
        last.get("inputs") == inputs
        and last.get("failed") == []
        and last.get("outputs") == _analysis_outputs(study)
    )


def analyse_study(
    study: Study,
    *,
    say: Callable[[str], None] = print,
    progress: bool = False,
    again: bool = False,
) -> tuple[Path, list[str]]:
    """Run the study's analysis notebooks over its runs (never re-running them) and write the
    report: `notebooks/<name>.ipynb|.html`, `index.html`, `compare.html`, `viewer/`. Returns
    the report's index and the notebooks that failed (each said in one line; the report
    still lists them). When nothing they read has changed since the last analysis, and every
    notebook ran then, the report is kept as it is (said in one line): a finished study run
    again took minutes to write the same pages.

    study: the loaded study; say: where the one-line messages go; progress: also say which
    notebook is running (each can take a minute on a large study); again: run the notebooks
    even when the last analysis is current."""
    from mbb.batch.notebooks import execute_notebook
    from mbb.batch.report import build_report

    runs = study.out / "runs"
    if (study.out / "notebooks").is_symlink():  # a folder of a received study: never written into
        say(
            f"notebooks not run: {study.out / 'notebooks'} is a symbolic link; mbb writes a "
            "study's notebooks only into a folder of its own (remove the link and run again)"
        )
        return build_report(study.out, quiet=True, study_name=study.spec.name), list(
            study.spec.notebooks
        )
    inputs = _analysis_inputs(study)
    if not again and _analysis_current(study, inputs):
        say(
            "analysis: up to date (the runs, the notebooks and mbb are unchanged since the "
            "last one, which ran every notebook); `--reanalyse` runs them again"
        )
        return study.out / "index.html", []
    failed = []
    t0 = time.perf_counter()
    names = list(study.spec.notebooks)
    for i, name in enumerate(names, 1):
        if progress:
            say(
                f"analysis: notebook {i} of {len(names)}, {name} ({time.perf_counter() - t0:.0f} s)"
            )
        try:
            execute_notebook(name, study.out / "notebooks", {"run_dirs": [str(runs)]})
        except Exception as exc:
            # papermill's error opens with a banner and the cell's traceback: its last line
            # (`ename: evalue`) is what the researcher needs, the executed copy keeps the rest
            ename, evalue = getattr(exc, "ename", None), getattr(exc, "evalue", None)
            what = f"{ename}: {evalue}" if ename else str(exc)
            say(
                f"notebook {name} failed: {' '.join(str(what).split())[:400]} "
                f"(the executed copy: {study.out / 'notebooks' / f'{name}.ipynb'})"
            )
            failed.append(name)
    if progress:
        say(f"analysis: writing the report and viewer ({time.perf_counter() - t0:.0f} s)")
    index = build_report(study.out, quiet=True, study_name=study.spec.name)
    record = {"inputs": inputs, "failed": failed, "outputs": _analysis_outputs(study)}
    try:
        replace_file(study.out / ANALYSIS_RECORD, json.dumps(record, indent=1))
    except OSError as exc:  # e.g. a folder of that name: the report stands, unrecorded
        say(
            f"analysis not recorded: {study.out / ANALYSIS_RECORD} cannot be replaced "
            f"({exc.strerror or exc}); the next run analyses again"
        )
    return index, failed


def estimate_study(
    study: Study,
    *,
    dry_runs: int = 1,
    reasoning_tokens: Mapping[str, int] | None = None,
    latency: Any = None,
    progress: Callable[[int, int, str], Any] | None = None,
) -> list[Any]:
    """What the study's runs will use, a row per cell (`mbb.batch.estimate.estimate`): each
    cell's condition dry-run `dry_runs` seeds against an emulation of its model's preset
    (cells that send the same requests share one dry run) and scaled to the study's seeds,
    at each model's limits and price. `reasoning_tokens`, `latency`: as in `estimate`;
    `progress`: called with (done, total, condition) before each cell."""
    from mbb.batch.estimate import estimate

    return estimate(
        [c.condition for c in study.cells],
        runs=len(study.seeds),
        dry_runs=dry_runs,
        reasoning_tokens=reasoning_tokens,
        latency=latency,
        progress=progress,
    )


def summary_lines(study: Study, outcome: StudyOutcome) -> list[str]:
    """What the command prints at the end."""
    lines = [
        f"{study.spec.name}: {outcome.runs} runs in {len(study.cells)} cells — "
        f"{outcome.done_before} done before, {outcome.completed} completed now, "
        f"{outcome.stopped} stopped, {outcome.failed} failed; {outcome.invalid} invalid "
        f"(over {study.spec.failures.invalid_share:.0%} failed or repaired calls); "
        f"{outcome.calls} LLM calls ({outcome.failed_calls} failed) in {outcome.seconds:.1f} s"
    ]
    if outcome.calls_without_usage:
        lines.append(
            f"usage: {outcome.calls_without_usage} of the answers reported no token counts; "
            "their tokens and cost are unknown (null in the llm_calls table, cost shown as "
            "unknown), never counted as 0"
            + (
                f"; {outcome.calls_implausible_usage} of them reported counts that cannot be "
                "true (0 tokens for an answer, far more than max_tokens or the prompt allows), "
                "not taken"
                if outcome.calls_implausible_usage
                else ""
            )
        )
    if outcome.notebooks_failed:
        lines.append(
            f"analysis: {len(outcome.notebooks_failed)} notebook(s) failed "
            f"({', '.join(outcome.notebooks_failed)}); the report lists them. Once mended, "
            "the same command runs the analyses again over the finished runs"
        )
    if outcome.report is not None:
        lines.append(f"report: {outcome.report}")
    return lines
