"""A condition's parameters as data: the typed, validated schema of a params file.

The schema checks shapes, types and ranges (`extra="forbid"`, strict types). Things that are
registered elsewhere — rules and mechanisms (`mbb.protocol.rules`), personas
(`mbb.agents.personas`), agent backends (`mbb.agents.backends`), task catalogues — are named
here as plain strings; the run builder (`mbb.batch.build.check_condition`) checks each name
against its registry, one line per error, before a run starts. So the schema imports nothing
above the core, and a new rule, persona or backend touches only its registry.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_serializer,
    model_validator,
)

from mbb.core.eventlog import TEXT_LIMIT_MAX
from mbb.core.paths import outputs_root, user_path
from mbb.llm.config import ModelConfig, Price

__all__ = [
    "DEFAULT_ROSTER",
    "BehaviourKnobs",
    "BudgetParams",
    "Condition",
    "DeadlineParams",
    "LlmParams",
    "MechanismParams",
    "MemoryParams",
    "NegotiationParams",
    "PopulationChange",
    "SolverLoopParams",
    "TaskParams",
    "TimeParams",
    "WindowParams",
    "WorkerOverride",
    "WorkerSpec",
    "WorkersParams",
]


def _defaults_left_out(data: Any, defaults: dict[str, Any]) -> Any:
    """Drop fields added after conditions were first recorded while they hold their default,
    so such conditions are recorded (and fingerprinted) exactly as before the field existed."""
    if isinstance(data, dict):
        for key, default in defaults.items():
            if key in data and data[key] == default:
                data.pop(key)
    return data


_FLAG_WORDS = {"yes": True, "on": True, "no": False, "off": False}


def _flag(v: Any) -> Any:
    """Boolean fields also take yes/no/on/off (YAML 1.1 booleans), as written; nothing else
    (1, 'true', '') is coerced."""
    if isinstance(v, str) and v.lower() in _FLAG_WORDS:
        return _FLAG_WORDS[v.lower()]
    return v


Flag = Annotated[bool, BeforeValidator(_flag)]
_WORKER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")


def _worker_name(v: str) -> str:
    if not _WORKER_NAME.fullmatch(v):
        raise ValueError(
            "a worker name is an identifier: a letter, then letters, digits or _ (at most 32)"
        )
    return v


WorkerName = Annotated[str, AfterValidator(_worker_name)]


class _Strict(BaseModel):
    # strict: no coercion (true is not 1, "5" is not 5, 5.0 is not an integer)
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, strict=True)


class BehaviourKnobs(_Strict):
    """Explicit switches of the scripted personas' behaviour, so an effect can be planted or
    removed (mbb.agents.personas reads them). The defaults reproduce the personas as they
    always were. This is the one place that says what each knob does."""

    urgency_premium: Flag = Field(
        True, description="Bids rise with urgency (remaining need over time left)."
    )
    termination_discount: Flag = Field(
        True, description="Bids drop to a quarter once the task cannot finish in time."
    )
    rule_recall: Literal["memory_or_new", "memory", "rederive"] = Field(
        "memory_or_new",
        description="Where a rule-advocating persona's rule comes from in a later subrun. "
        "memory_or_new: scratch memory if it holds one, else a fresh proposal (as always); "
        "memory: scratch memory only (after its first subrun it states no rule without it); "
        "rederive: its own standing preference, restated every subrun whatever memory holds.",
    )
    honour_rate: float = Field(
        1.0, ge=0, le=1, description="Probability that a debt is honoured when it falls due."
    )
    private_share: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Probability that a message goes privately to the peer it concerns (else "
        "publicly), whatever the persona would do: its addressee, else the peer its intents "
        "name, else the top bidder among the others (the peer whose place the talk contests); "
        "None: each persona's own choice (deals, offers and bloc invitations privately, "
        "proposals and arguments publicly).",
    )
    after_win_bid: float = Field(
        1.0,
        gt=0,
        le=4,
        description="Multiplier on a worker's bid in the round after it won (first in the "
        "schedule): >1 momentum, <1 turn-taking, 1 as always.",
    )
    budget_pacing: Literal["balance", "start"] = Field(
        "balance",
        description="What the per-round allowance is sized from. balance: the current balance "
        "spread over the subruns left (as always); start: the balance at the worker's first "
        "declaration spread over all subruns, so bids ignore how much is left (capped by it).",
    )
    thrift: float = Field(
        0.0,
        ge=0,
        le=4,
        description="Bids are multiplied by (balance / balance at the first declaration) to "
        "this power: a worker that has spent more bids less; 0 as always.",
    )

    @model_serializer(mode="wrap")
    def _new_fields_at_default_left_out(self, handler: Any) -> Any:
        # as `_defaults_left_out`, but a knob set explicitly is kept even at its default: a
        # worker override that sets it back to the default must not inherit the condition's
        unset = {n: _KNOB_DEFAULTS[n] for n in _LATER_KNOBS if n not in self.model_fields_set}
        return _defaults_left_out(handler(self), unset)


_LATER_KNOBS = ("private_share", "after_win_bid", "budget_pacing", "thrift")
_KNOB_DEFAULTS = {n: BehaviourKnobs.model_fields[n].default for n in _LATER_KNOBS}


class WorkerOverride(_Strict):
    """Per-worker settings that replace the condition-wide ones for that worker only."""

    name: WorkerName | None = Field(
        None,
        description="Rename the worker (default ids are W1..Wn): a letter, then letters, digits "
        "or _ (at most 32).",
    )
    persona: str | None = Field(
        None, description="Scripted negotiation persona (a registered one, mbb.agents.personas)."
    )
    negotiator: str | None = Field(
        None, description="Negotiator backend (a registered one, mbb.agents.backends)."
    )
    solver: str | None = Field(
        None, description="Solver backend (a registered one, mbb.agents.backends)."
    )
    model: str | None = Field(None, description="LLM model config name (llm backends).")
    budget: int | None = Field(None, ge=0, description="Starting credits for this worker.")
    deadline_min: float | None = Field(None, gt=0, description="Deadline in simulated minutes.")
    behaviour: BehaviourKnobs | None = Field(
        None,
        description="Scripted behaviour knobs for this worker; the knobs given here replace "
        "the condition's, the others are the condition's.",
    )


DEFAULT_ROSTER: tuple[str, ...] = (  # personas of mbb.agents.personas, checked by a test
    "price_first",
    "deadline_advocate",
    "reciprocator",
    "coalition_builder",
    "shortest_job_advocate",
)


class WorkersParams(_Strict):
    count: int = Field(5, ge=1, le=1000, description="Number of workers N.")
    personas: list[str] = Field(
        default_factory=lambda: list(DEFAULT_ROSTER),
        min_length=1,
        description="One persona per worker (W1..Wn in order), or one for everyone; a list of "
        "another length is an error. Not given: the default roster of five in order, repeated "
        "from the start for a sixth worker and beyond.",
    )
    seating: Literal["fixed", "rotate"] = Field(
        "rotate",
        description="rotate: the persona list is rotated by the run's seed (seat i gets "
        "personas[(i + seed) mod n]), so every persona sits in every seat equally often over "
        "seeds and seed 0 is the list as written; fixed: the list as written in every run (the "
        "paper's roster). Personas named in overrides stay where they are.",
    )
    behaviour: BehaviourKnobs = Field(
        default_factory=BehaviourKnobs, description="Scripted behaviour knobs for every worker."
    )
    negotiator: str = Field(
        "scripted", description="Negotiator backend (registered in mbb.agents.backends)."
    )
    solver: str = Field(
        "modeled", description="Solver backend (registered in mbb.agents.backends)."
    )
    model: str | None = None
    overrides: dict[str, WorkerOverride] = Field(
        default_factory=dict, description="Keyed by default id (W1..Wn)."
    )

    @model_validator(mode="before")
    @classmethod
    def _default_roster(cls, data: Any) -> Any:
        """Without `personas`, the default roster resolved to exactly `count` entries (so the
        resolved condition, re-validated from its dump, states who is who)."""
        if isinstance(data, dict) and "personas" not in data:
            n = data.get("count", 5)
            if type(n) is int and 1 <= n <= 1000:
                return {**data, "personas": [DEFAULT_ROSTER[i % 5] for i in range(n)]}
        return data

    @model_validator(mode="after")
    def _one_persona_per_worker(self) -> WorkersParams:
        n = len(self.personas)
        if n not in (1, self.count):
            raise ValueError(
                f"personas lists {n} persona(s) but count is {self.count}: give one per worker "
                f"(W1..W{self.count} in order) or one for everyone"
            )
        return self

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
    reset_each_subrun: Flag = Field(False, description="Refill budgets at each subrun start.")


class DeadlineParams(_Strict):
    minutes: float = Field(25.0, gt=0, le=24 * 60, description="Private deadline per subrun.")


class MemoryParams(_Strict):
    """Memory and after-action reports are separate factors (as in the paper). The paper's
    memory-off (`params/memory_off.yaml`) turns off the persistent memory (scratch notes: the
    condensed history, debts, rules) and keeps the after-action reports."""

    enabled: Flag = Field(
        True, description="Scratch notes persist across subruns (mbb.protocol.rules.SWITCHES)."
    )
    reports: Flag = Field(
        True, description="After-action reports at a subrun's end (mbb.protocol.rules.SWITCHES)."
    )
    max_chars: int = Field(
        4000,
        ge=0,
        le=TEXT_LIMIT_MAX,
        description="Scratch size bound per worker (oldest dropped).",
    )

    @model_serializer(mode="wrap")
    def _new_fields_at_default_left_out(self, handler: Any) -> Any:
        return _defaults_left_out(handler(self), {"reports": True})


class NegotiationParams(_Strict):
    conversation: Flag = Field(
        True, description="A conversation phase each round (mbb.protocol.rules.SWITCHES)."
    )
    max_turns: int = Field(3, ge=0, le=50, description="Conversation turns per round.")
    bids: str = Field("revisable", description="revisable or fixed (mbb.protocol.rules.SWITCHES).")
    withdrawal: str = Field(
        "allowed", description="allowed or forbidden (mbb.protocol.rules.SWITCHES)."
    )
    ballot_reasoning: str = Field(
        "published", description="published or secret (mbb.protocol.rules.SWITCHES)."
    )
    # bounded so that no event of mbb's is longer than the log reader reads (MAX_LINE_CHARS)
    note_max_chars: int = Field(280, ge=0, le=TEXT_LIMIT_MAX)
    message_max_chars: int = Field(600, ge=1, le=TEXT_LIMIT_MAX)
    reasoning_max_chars: int = Field(600, ge=0, le=TEXT_LIMIT_MAX)

    @model_serializer(mode="wrap")
    def _new_fields_at_default_left_out(self, handler: Any) -> Any:
        return _defaults_left_out(
            handler(self), {"withdrawal": "allowed", "ballot_reasoning": "published"}
        )


class WindowParams(_Strict):
    min_s: int = Field(30, ge=1, description="Shortest window a worker may declare (seconds).")
    max_s: int = Field(300, ge=1, description="Longest window a worker may declare (seconds).")

    @model_validator(mode="after")
    def _ordered(self) -> WindowParams:
        if self.min_s > self.max_s:
            raise ValueError(f"min_s ({self.min_s}) must not exceed max_s ({self.max_s})")
        return self


class MechanismParams(_Strict):
    kind: str = Field(
        "negotiated",
        description="Who decides the schedule: negotiated or a centralized mechanism "
        "(registered in mbb.protocol.rules.MECHANISMS).",
    )
    quantum_s: int = Field(
        60,
        ge=1,
        description="Round-robin time slice, and the per-candidate round budget of "
        "proportional_share (seconds).",
    )
    aggregation: str = Field(
        "kemeny",
        description="How ballots become one order; ties by bid, then queue order (registered "
        "in mbb.protocol.rules.AGGREGATION).",
    )
    payment: str = Field(
        "pay_your_bid",
        description="What a holder pays at window start (mbb.protocol.rules.PAYMENT).",
    )
    allocation: str = Field(
        "median_ballot", description="Window length (mbb.protocol.rules.ALLOCATION)."
    )
    kemeny_exact_max: int = Field(
        8, ge=1, le=16, description="Exact Kemeny up to this many candidates; Borda beyond."
    )


class TaskParams(_Strict):
    kind: Literal["modeled", "real"] = Field(
        "modeled", description="Modeled work or real programs."
    )
    assignment: Literal["balanced", "rotate", "random", "same"] = Field(
        "balanced",
        description="balanced: difficulty tiers in a Latin square over seats x subruns, "
        "randomized per seed (mbb.tasks.workload); rotate: the paper's fixed rotation (every "
        "seed gives a seat the same task in each subrun); random: any task; same: one task for "
        "everyone per subrun.",
    )
    work_scale: float = Field(1.0, gt=0, description="Multiplies every modeled task's work W.")
    load: float | None = Field(
        None,
        gt=0,
        le=10,
        description="Expected total modeled work of a subrun over its capacity (the latest "
        "deadline among its workers); scales every modeled task's W to match. null: the "
        "catalogue's W times work_scale. Modeled tasks only (a real task's work is not modeled).",
    )
    suite: list[str] | None = Field(None, description="Task ids to draw from (default: all).")
    reference_mode: Literal["broker", "exec_only"] = Field(
        "broker",
        description="broker: ./reference runs outside the worker's sandbox (nothing of it is "
        "mapped where the worker could dump it); exec_only: a mode-0111 copy (ProgramBench).",
    )

    @model_validator(mode="after")
    def _one_way_to_scale(self) -> TaskParams:
        if self.load is not None and self.work_scale != 1.0:
            raise ValueError(
                f"give tasks.load ({self.load}) or tasks.work_scale ({self.work_scale}), not "
                "both (tasks.load: null scales the catalogue's work by work_scale)"
            )
        return self


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


_DEFAULT_CACHE_FILE = "outputs/llm_cache.sqlite"


class LlmParams(_Strict):
    """Where LLM answers are cached and how the cache is used."""

    cache: Literal["read_write", "replay", "off"] = Field(
        "read_write",
        description="read_write: reuse recorded answers, record new ones; replay: recorded "
        "answers only (zero network calls; a miss stops the run); off: always call.",
    )
    cache_file: str = Field(
        _DEFAULT_CACHE_FILE,
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
        """The cache file: the default lives under `outputs/` (`mbb.core.paths.outputs_root`, so a
        notebook run from JupyterLab never writes inside `notebooks/`); a path given is the
        user's, relative to the current directory."""
        if self.cache_file == _DEFAULT_CACHE_FILE:
            return outputs_root() / Path(_DEFAULT_CACHE_FILE).name
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
    model: str | None = Field(
        None,
        description="How the subrun clock moves (registered in mbb.protocol.rules.TIME_MODELS). "
        "null (the default) is resolved when the run is built (mbb.batch.build.resolve_clock): "
        "charged, the paper's clock, wherever a worker's negotiator or solver is an LLM; "
        "virtual for scripted populations.",
    )
    max_rounds_per_subrun: int = Field(500, ge=1, description="Safety stop for a runaway subrun.")


class Condition(_Strict):
    """One experimental condition. Every field has a documented default; see params/base.yaml."""

    name: str = Field(
        "base", pattern=r"^[A-Za-z0-9_.-]+$", max_length=100, description="Output folder name."
    )
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

    def worker_specs(self, seed: int | None = None) -> list[WorkerSpec]:
        """Everyone who takes part at some point: W1..Wn with their overrides, then newcomers
        from `population_changes` (with the subrun they join and the one they leave before).
        `seed`: the run's seed, which rotates the persona list under `workers.seating: rotate`
        (None: the list as written)."""
        w = self.workers
        shift = seed if seed is not None and w.seating == "rotate" else 0

        def spec(i: int, wid: str, o: WorkerOverride, joins: int) -> WorkerSpec:
            return WorkerSpec(
                id=o.name or wid,
                index=i,
                persona=o.persona or w.personas[(i + shift) % len(w.personas)],
                behaviour=(
                    w.behaviour.model_copy(update=o.behaviour.model_dump(exclude_unset=True))
                    if o.behaviour is not None
                    else w.behaviour
                ),
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
    persona: str
    negotiator: str
    solver: str
    model: str | None
    budget: int
    deadline_s: float
    behaviour: BehaviourKnobs = Field(default_factory=BehaviourKnobs)
    joins: int = 1  # first subrun the worker takes part in
    leaves: int | None = None  # first subrun it no longer takes part in

    def present_in(self, subrun: int) -> bool:
        return self.joins <= subrun and (self.leaves is None or subrun < self.leaves)
