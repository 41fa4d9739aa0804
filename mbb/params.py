"""A condition's parameters: one typed, validated model loaded from YAML.

Precedence (highest first): explicit overrides (papermill, CLI `--set`) > the YAML file > the
defaults below. Overrides are deep-merged into the file, so overriding `budget.credits` keeps
`budget.reset_each_subrun`; a misspelt key anywhere is an error, never silently ignored.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from mbb.llm.config import ModelConfig, Price
from mbb.paths import is_bare_name, params_file, user_path

__all__ = [
    "PERSONAS",
    "BudgetParams",
    "Condition",
    "DeadlineParams",
    "LlmParams",
    "MechanismParams",
    "MemoryParams",
    "NegotiationParams",
    "ParamsError",
    "PopulationChange",
    "SolverLoopParams",
    "TaskParams",
    "TimeParams",
    "WindowParams",
    "WorkerOverride",
    "WorkerSpec",
    "WorkersParams",
    "deep_merge",
    "load_params",
    "parse_set_option",
]

PersonaName = Literal[
    "price_first",
    "deadline_advocate",
    "reciprocator",
    "coalition_builder",
    "shortest_job_advocate",
    "quitter",
    "rule_maker",
]
PERSONAS: tuple[str, ...] = PersonaName.__args__  # type: ignore[attr-defined]

AggregationRule = Literal["kemeny", "borda", "price_only", "consensus_else_price"]
PaymentRule = Literal["pay_your_bid", "next_price", "none"]
AllocationRule = Literal["median_ballot", "declared"]


class ParamsError(ValueError):
    """A params file or override is invalid; the message names file, field and what is allowed."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class WorkerOverride(_Strict):
    """Per-worker settings that replace the condition-wide ones for that worker only."""

    name: str | None = Field(None, description="Rename the worker (default ids are W1..Wn).")
    persona: PersonaName | None = Field(None, description="Scripted negotiation persona.")
    negotiator: Literal["scripted", "llm"] | None = Field(None, description="Negotiator backend.")
    solver: Literal["modeled", "oracle", "llm"] | None = Field(None, description="Solver backend.")
    model: str | None = Field(None, description="LLM model config name (llm backends).")
    budget: int | None = Field(None, ge=0, description="Starting credits for this worker.")
    deadline_min: float | None = Field(None, gt=0, description="Deadline in simulated minutes.")


class WorkersParams(_Strict):
    count: int = Field(5, ge=1, le=1000, description="Number of workers N.")
    personas: list[PersonaName] = Field(
        default_factory=lambda: [
            "price_first",
            "deadline_advocate",
            "reciprocator",
            "coalition_builder",
            "shortest_job_advocate",
        ],
        min_length=1,
        description="Personas assigned to W1..Wn in order, cycling when N exceeds the list.",
    )
    negotiator: Literal["scripted", "llm"] = "scripted"
    solver: Literal["modeled", "oracle", "llm"] = "modeled"
    model: str | None = None
    overrides: dict[str, WorkerOverride] = Field(
        default_factory=dict, description="Keyed by default id (W1..Wn)."
    )

    @model_validator(mode="after")
    def _overrides_name_real_workers(self) -> WorkersParams:
        ids = {f"W{i + 1}" for i in range(self.count)}
        unknown = sorted(set(self.overrides) - ids)
        if unknown:
            raise ValueError(
                f"overrides for unknown worker(s) {unknown}; with count={self.count} the ids are "
                f"W1..W{self.count}"
            )
        names = [o.name for o in self.overrides.values() if o.name]
        if len(names) != len(set(names)):
            raise ValueError(f"override names must be unique, got {names}")
        return self


class BudgetParams(_Strict):
    credits: int = Field(1000, ge=0, description="Starting credits per worker (uniform).")
    reset_each_subrun: bool = Field(False, description="Refill budgets at each subrun start.")


class DeadlineParams(_Strict):
    minutes: float = Field(25.0, gt=0, le=24 * 60, description="Private deadline per subrun.")


class MemoryParams(_Strict):
    enabled: bool = Field(True, description="Scratch memory persists across subruns.")
    max_chars: int = Field(
        4000, ge=0, description="Scratch size bound per worker (oldest dropped)."
    )


class NegotiationParams(_Strict):
    conversation: bool = Field(True, description="Run the conversation phase.")
    max_turns: int = Field(3, ge=0, le=50, description="Conversation turns per round.")
    bids: Literal["revisable", "fixed"] = Field("revisable", description="May bids be revised?")
    note_max_chars: int = Field(280, ge=0)
    message_max_chars: int = Field(600, ge=1)
    reasoning_max_chars: int = Field(600, ge=0)


class WindowParams(_Strict):
    min_s: int = Field(30, ge=1, description="Shortest window a worker may declare (seconds).")
    max_s: int = Field(300, ge=1, description="Longest window a worker may declare (seconds).")

    @model_validator(mode="after")
    def _ordered(self) -> WindowParams:
        if self.min_s > self.max_s:
            raise ValueError(f"min_s ({self.min_s}) must not exceed max_s ({self.max_s})")
        return self


MechanismKind = Literal[
    "negotiated",
    "fcfs",
    "edf",
    "sjf",
    "round_robin",
    "first_price",
    "second_price",
    "proportional_share",
]


class MechanismParams(_Strict):
    kind: MechanismKind = Field(
        "negotiated",
        description="negotiated: the agents' declarations, conversation and ballots decide "
        "(phases 1-4). Anything else: a centralized scheduler replaces them "
        "(mbb.scheduling.centralized): fcfs, edf (true private deadlines), sjf (requested "
        "durations), round_robin (quantum_s), first_price / second_price (sealed bids, one "
        "window per round), proportional_share (bid share of a round budget).",
    )
    quantum_s: int = Field(
        60,
        ge=1,
        description="Round-robin time slice, and the per-candidate round budget of "
        "proportional_share (seconds).",
    )
    aggregation: AggregationRule = Field(
        "kemeny", description="How ballots become one order; ties by bid, then queue order."
    )
    payment: PaymentRule = Field("pay_your_bid", description="What a holder pays at window start.")
    allocation: AllocationRule = Field(
        "median_ballot", description="Window length: median of ballot allocations, or declared."
    )
    kemeny_exact_max: int = Field(
        8, ge=1, le=16, description="Exact Kemeny up to this many candidates; Borda beyond."
    )


class TaskParams(_Strict):
    kind: Literal["modeled", "real"] = Field(
        "modeled", description="Modeled work or real programs."
    )
    assignment: Literal["rotate", "random", "same"] = Field(
        "rotate", description="rotate: a different program per worker and subrun."
    )
    work_scale: float = Field(1.0, gt=0, description="Multiplies every modeled task's work W.")
    suite: list[str] | None = Field(None, description="Task ids to draw from (default: all).")
    reference_mode: Literal["broker", "exec_only"] = Field(
        "broker",
        description="broker: ./reference runs outside the worker's sandbox (nothing of it is "
        "mapped where the worker could dump it); exec_only: a mode-0111 copy (ProgramBench).",
    )


class PopulationChange(_Strict):
    """Between subruns, workers leave and newcomers arrive (empty scratch, fresh budget)."""

    subrun: int = Field(ge=2, description="First subrun with the new population.")
    remove: list[str] = Field(default_factory=list, description="Workers who leave.")
    add: list[WorkerOverride] = Field(
        default_factory=list, description="Newcomers (unnamed ones get the next free W<k>)."
    )


class SolverLoopParams(_Strict):
    """Limits of the LLM solver's tool loop (see `mbb.agents.llm_solver`)."""

    max_turns_per_window: int = Field(
        20, ge=1, description="Model turns per window; then the solver releases the window."
    )
    planning_turns: int = Field(
        2, ge=1, description="Turns outside a window to make a request; then the default request."
    )
    history_turns: int = Field(
        24,
        ge=1,
        description="Most recent turns kept in the prompt; older ones are dropped (and counted) in "
        "chunks of half as many, so the prompt keeps its prefix between drops.",
    )
    output_chars: int = Field(2000, ge=100, description="Tool output shown to the model, cut.")
    deadline_warning_s: float = Field(
        120.0, ge=0, description="Seconds before the deadline from which notices warn."
    )
    report_words: int = Field(250, ge=20, description="Length cap asked of the solver's report.")
    report_commands: int = Field(40, ge=1, description="Last commands listed in the report.")


class LlmParams(_Strict):
    """Where LLM answers are cached and how the cache is used."""

    cache: Literal["read_write", "replay", "off"] = Field(
        "read_write",
        description="read_write: reuse recorded answers, record new ones; replay: recorded "
        "answers only (zero network calls; a miss stops the run); off: always call.",
    )
    cache_file: str = Field(
        "outputs/llm_cache.sqlite",
        description="SQLite file of recorded answers (a relative path: to the current directory).",
    )
    solver: SolverLoopParams = Field(default_factory=SolverLoopParams)
    max_cost_usd: float | None = Field(
        None,
        gt=0,
        description="Stop the batch (its runs: a recorded, resumable stop) once its new calls "
        "cost this much; cached answers are free (mbb.llm.budget).",
    )
    max_tokens_total: int | None = Field(
        None, gt=0, description="Same, in prompt + completion tokens of new calls."
    )

    def cache_path(self) -> Path:
        return user_path(self.cache_file)

    @model_serializer(mode="wrap")
    def _caps_only_when_set(self, handler: Any) -> Any:
        # unset caps are left out, so conditions without them are recorded (and fingerprinted)
        # exactly as before the caps existed
        data = handler(self)
        if isinstance(data, dict):
            for key in ("max_cost_usd", "max_tokens_total"):
                if data.get(key) is None:
                    data.pop(key, None)
        return data


class TimeParams(_Strict):
    model: Literal["virtual", "measured"] = Field(
        "virtual", description="Command runtime modeled (deterministic) or measured (real tasks)."
    )
    max_rounds_per_subrun: int = Field(500, ge=1, description="Safety stop for a runaway subrun.")


class Condition(_Strict):
    """One experimental condition. Every field has a documented default; see params/base.yaml."""

    name: str = Field("base", pattern=r"^[A-Za-z0-9_.-]+$", description="Output folder name.")
    description: str = ""
    seed: int = Field(0, ge=0, description="Seed of the first run; run k uses seed + k.")
    subruns: int = Field(4, ge=1, le=100)
    workers: WorkersParams = Field(default_factory=WorkersParams)
    budget: BudgetParams = Field(default_factory=BudgetParams)
    deadline: DeadlineParams = Field(default_factory=DeadlineParams)
    memory: MemoryParams = Field(default_factory=MemoryParams)
    negotiation: NegotiationParams = Field(default_factory=NegotiationParams)
    windows: WindowParams = Field(default_factory=WindowParams)
    mechanism: MechanismParams = Field(default_factory=MechanismParams)
    tasks: TaskParams = Field(default_factory=TaskParams)
    time: TimeParams = Field(default_factory=TimeParams)
    population_changes: list[PopulationChange] = Field(
        default_factory=list, description="Replace, add or remove workers between subruns."
    )
    llm: LlmParams = Field(default_factory=LlmParams)
    models: dict[str, ModelConfig] = Field(
        default_factory=dict, description="LLM model configs by name (workers' `model` names one)."
    )
    prices: dict[str, Price] = Field(
        default_factory=dict, description="USD per 1M prompt/completion tokens by model name."
    )

    @model_validator(mode="after")
    def _llm_workers_name_a_model(self) -> Condition:
        for spec in self.worker_specs():
            if "llm" in (spec.negotiator, spec.solver) and spec.model not in self.models:
                known = ", ".join(sorted(self.models)) or "none defined"
                raise ValueError(
                    f"worker {spec.id} uses an llm backend but its model {spec.model!r} is not "
                    f"an entry of `models` ({known})"
                )
        return self

    @field_validator("name")
    @classmethod
    def _no_dots_only(cls, v: str) -> str:
        if set(v) <= {"."}:
            raise ValueError("name must not be only dots")
        return v

    @model_validator(mode="after")
    def _population_changes_fit(self) -> Condition:
        for change in self.population_changes:
            if change.subrun > self.subruns:
                raise ValueError(
                    f"population_changes: subrun {change.subrun} is after the last subrun "
                    f"({self.subruns})"
                )
        self.worker_specs()  # raises on an impossible removal or a duplicate name
        return self

    @model_validator(mode="after")
    def _solvers_match_tasks(self) -> Condition:
        kind = self.tasks.kind
        for s in self.worker_specs():
            if (s.solver == "modeled") != (kind == "modeled"):
                need = "tasks.kind: modeled" if s.solver == "modeled" else "tasks.kind: real"
                raise ValueError(f"worker {s.id}: solver {s.solver!r} needs {need} (got {kind!r})")
        if self.tasks.suite:
            if kind == "modeled":
                from mbb.agents.modeled import MODELED_TASKS

                known = {t.task_id for t in MODELED_TASKS}
            else:
                from mbb.tasks.specs import TASK_SPECS

                known = set(TASK_SPECS)
            unknown = sorted(set(self.tasks.suite) - known)
            if unknown:
                raise ValueError(
                    f"tasks.suite: unknown {kind} task(s) {unknown}; known: {sorted(known)}"
                )
        return self

    def worker_specs(self) -> list[WorkerSpec]:
        """Everyone who takes part at some point: W1..Wn with their overrides, then newcomers
        from `population_changes` (with the subrun they join and the one they leave before)."""
        w = self.workers

        def spec(i: int, wid: str, o: WorkerOverride, joins: int) -> WorkerSpec:
            return WorkerSpec(
                id=o.name or wid,
                index=i,
                persona=o.persona or w.personas[i % len(w.personas)],
                negotiator=o.negotiator or w.negotiator,
                solver=o.solver or w.solver,
                model=o.model if o.model is not None else w.model,
                budget=o.budget if o.budget is not None else self.budget.credits,
                deadline_s=60.0 * (o.deadline_min or self.deadline.minutes),
                joins=joins,
            )

        none = WorkerOverride()
        specs = [
            spec(i, f"W{i + 1}", w.overrides.get(f"W{i + 1}", none), 1) for i in range(w.count)
        ]
        by_id = {s.id: s for s in specs}
        for change in sorted(self.population_changes, key=lambda c: c.subrun):
            for wid in change.remove:
                old = by_id.get(wid)
                if old is None or not old.present_in(change.subrun):
                    raise ValueError(
                        f"population_changes: subrun {change.subrun} removes {wid!r}, who is "
                        f"not in the population then (present: "
                        f"{sorted(k for k, v in by_id.items() if v.present_in(change.subrun))})"
                    )
                by_id[wid] = specs[old.index] = old.model_copy(update={"leaves": change.subrun})
            for o in change.add:
                i = len(specs)
                new = spec(i, f"W{i + 1}", o, change.subrun)
                if new.id in by_id:
                    raise ValueError(f"population_changes: newcomer name {new.id!r} is taken")
                specs.append(new)
                by_id[new.id] = new
        return specs


class WorkerSpec(_Strict):
    """A worker after defaults and overrides are resolved."""

    id: str
    index: int
    persona: PersonaName
    negotiator: Literal["scripted", "llm"]
    solver: Literal["modeled", "oracle", "llm"]
    model: str | None
    budget: int
    deadline_s: float
    joins: int = 1  # first subrun the worker takes part in
    leaves: int | None = None  # first subrun it no longer takes part in

    def present_in(self, subrun: int) -> bool:
        return self.joins <= subrun and (self.leaves is None or subrun < self.leaves)


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Merge `override` into a copy of `base`: mappings merge key by key, anything else replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def parse_set_option(option: str) -> dict[str, Any]:
    """`a.b.c=VALUE` (VALUE parsed as YAML) -> {'a': {'b': {'c': VALUE}}}."""
    if "=" not in option:
        raise ParamsError(f"--set expects KEY=VALUE with a dotted KEY, got {option!r}")
    key, raw = option.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise ParamsError(f"--set: empty segment in key {key!r}")
    try:
        value: Any = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise ParamsError(f"--set {key}: value {raw!r} is not valid YAML: {exc}") from None
    for part in reversed(parts):
        value = {part: value}
    return value


def _format_validation_error(source: str, exc: ValidationError) -> str:
    lines = [f"{source}: invalid condition ({exc.error_count()} problem(s))"]
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            parent = _model_at(err["loc"][:-1])
            allowed = ", ".join(sorted(parent.model_fields)) if parent else "see params/base.yaml"
            msg = f"unknown field; allowed here: {allowed}"
        elif err["type"] == "literal_error":
            msg = f"{msg} (got {err.get('input')!r})"
        elif "input" in err and not isinstance(err["input"], dict | list):
            msg = f"{msg} (got {err['input']!r})"
        lines.append(f"  - {loc}: {msg}")
    return "\n".join(lines)


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model owning a location, so an unknown-field error can list what is allowed."""
    model: type[BaseModel] = Condition
    parts = list(loc)
    while parts:
        field = model.model_fields.get(str(parts.pop(0)))
        if field is None:
            return None
        ann = field.annotation
        if get_origin(ann) is dict:  # dict[str, Model]: the next part is a key
            ann = get_args(ann)[1]
            if not parts:
                return None
            parts.pop(0)
        nested = [
            a for a in (ann, *get_args(ann)) if isinstance(a, type) and issubclass(a, BaseModel)
        ]
        if not nested:
            return None
        model = nested[0]
    return model


def _read_yaml_with_extends(path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    """Read a params file; `extends: other.yaml` (relative to it) is read first and merged under."""
    label = str(path)
    if not path.is_file():
        raise ParamsError(f"{label}: no such params file")
    if path.resolve() in chain:
        raise ParamsError(f"{label}: 'extends' cycle: {' -> '.join(map(str, (*chain, path)))}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ParamsError(f"{label}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ParamsError(
            f"{label}: the top level must be a mapping of fields, got {type(data).__name__}"
        )
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise ParamsError(f"{label}: extends: must be a file name, got {parent!r}")
    try:  # a bare name (`extends: base`) is one of mbb's conditions; a file name is beside this one
        parent_path = params_file(parent) if is_bare_name(parent) else path.parent / parent
    except FileNotFoundError as exc:
        raise ParamsError(f"{label}: extends: {exc}") from None
    if not parent_path.is_file():  # name the file that holds the bad `extends`, not only the target
        raise ParamsError(f"{label}: extends: no such params file {str(parent_path)!r}")
    base = _read_yaml_with_extends(parent_path, (*chain, path.resolve()))
    return deep_merge(base, data)


def load_params(
    source: str | Path | Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
) -> Condition:
    """Load a condition from a YAML path (or a mapping), deep-merging `overrides` on top.

    `source`: a path relative to the current directory, a bare name of one of mbb's conditions
    (`base`, see `mbb.paths`), or the params as a mapping; `overrides`: nested fields merged on
    top."""
    if isinstance(source, Mapping):
        label, data = "<params>", dict(source)
    else:
        try:
            path = params_file(source)
        except FileNotFoundError as exc:
            raise ParamsError(str(exc)) from None
        label, data = str(source), _read_yaml_with_extends(path, ())
    if overrides:
        if not isinstance(overrides, Mapping):
            raise ParamsError(
                f"{label}: overrides must be a mapping, got {type(overrides).__name__}"
            )
        data = deep_merge(data, overrides)
    try:
        return Condition.model_validate(data)
    except ValidationError as exc:
        raise ParamsError(_format_validation_error(label, exc)) from None
