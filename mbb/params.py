"""A condition's parameters: one typed, validated model loaded from YAML.

Precedence (highest first): explicit overrides (papermill, CLI `--set`) > the YAML file > the
defaults below. Overrides are deep-merged into the file, so overriding `budget.credits` keeps
`budget.reset_each_subrun`; a misspelt key anywhere is an error, never silently ignored.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    Literal,
    TypeAlias,
    get_args,
    get_origin,
)

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from mbb.core.paths import is_bare_name, params_file, user_path
from mbb.llm.config import ModelConfig, Price
from mbb.protocol.backends import NEGOTIATOR_BACKENDS, SOLVER_BACKENDS
from mbb.protocol.rules import (
    AGGREGATION,
    ALLOCATION,
    MECHANISMS,
    PAYMENT,
    SWITCHES,
    TIME_MODELS,
    Registry,
)

__all__ = [
    "PERSONAS",
    "BehaviourKnobs",
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
    "safe_yaml",
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


def _choices(registry: Registry[Any] | dict[str, Any]) -> Any:
    """A Literal of a registry's names: params accept exactly the registered rules, and an
    unknown name is one line listing the valid ones."""
    names = registry.names() if isinstance(registry, Registry) else tuple(registry)
    return Literal[names]


if TYPE_CHECKING:  # the registries decide the values; a type checker sees names
    AggregationRule: TypeAlias = str
    PaymentRule: TypeAlias = str
    AllocationRule: TypeAlias = str
    MechanismKind: TypeAlias = str
    TimeModel: TypeAlias = str
    Withdrawal: TypeAlias = str
    BallotReasoning: TypeAlias = str
    BidsRule: TypeAlias = str
    NegotiatorBackend: TypeAlias = str
    SolverBackend: TypeAlias = str
else:
    AggregationRule = _choices(AGGREGATION)
    PaymentRule = _choices(PAYMENT)
    AllocationRule = _choices(ALLOCATION)
    MechanismKind = _choices(MECHANISMS)
    TimeModel = _choices(TIME_MODELS)
    Withdrawal = _choices(SWITCHES["negotiation.withdrawal"])
    BallotReasoning = _choices(SWITCHES["negotiation.ballot_reasoning"])
    BidsRule = _choices(SWITCHES["negotiation.bids"])
    NegotiatorBackend = _choices(NEGOTIATOR_BACKENDS)
    SolverBackend = _choices(SOLVER_BACKENDS)


def _switch_doc(key: str) -> str:
    return SWITCHES[key].describe()


def _defaults_left_out(data: Any, defaults: dict[str, Any]) -> Any:
    """Drop fields added after conditions were first recorded while they hold their default,
    so such conditions are recorded (and fingerprinted) exactly as before the field existed."""
    if isinstance(data, dict):
        for key, default in defaults.items():
            if key in data and data[key] == default:
                data.pop(key)
    return data


class ParamsError(ValueError):
    """A params file or override is invalid; the message names file, field and what is allowed."""


# --- reading YAML safely ----------------------------------------------------------------------
MAX_PARAMS_BYTES = 1 << 20  # a params file (or one --set value) larger than this is refused
MAX_DEPTH = 32  # nesting of mappings and lists, aliases expanded
MAX_ALIASES = 100  # `*name` references in one document
MAX_NODES = 20_000  # scalars, mappings and lists, aliases expanded (an alias bomb expands to 10^9)

_BOOL_TAG = "tag:yaml.org,2002:bool"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _LimitError(yaml.YAMLError):
    """The document breaks a size, depth or alias limit (message: one line, no input echoed)."""


class _ParamsLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 scalars and limits checked while composing, before anything is
    constructed or validated:

    - only true/false are booleans: `off`, `on`, `yes`, `no` stay strings, so documented values
      such as `llm.cache: off` load as written (boolean fields accept them, see `Flag`);
    - `1e3` is a float (YAML 1.1 wants `1.0e3` and reads `1e3` as a string);
    - a key given twice in one mapping is an error (PyYAML keeps the last one silently);
    - at most MAX_ALIASES aliases, MAX_DEPTH levels and MAX_NODES nodes with aliases expanded.
    """

    # types-PyYAML declares this an instance variable; PyYAML itself keeps it on the class
    yaml_implicit_resolvers: ClassVar[dict[str, list[tuple[str, re.Pattern[str]]]]] = {  # type: ignore[misc]
        first: [(tag, rx) for tag, rx in resolvers if tag != _BOOL_TAG]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _LimitError(f"more than {MAX_ALIASES} aliases (refused: an alias bomb?)")
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _LimitError(f"nested deeper than {MAX_DEPTH} levels (refused)")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Any:
        node = super().compose_document()
        _check_expanded(node)
        return node

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node)
                if key in seen:
                    mark = key_node.start_mark
                    raise _LimitError(
                        f"duplicate key {str(key)[:60]!r} at line {mark.line + 1}, column "
                        f"{mark.column + 1} (each key may appear once per mapping)"
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


_ParamsLoader.add_implicit_resolver(
    _BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_ParamsLoader.add_implicit_resolver(
    _FLOAT_TAG, re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def _check_expanded(root: Any) -> None:
    """Size and depth of the document with every alias expanded, computed on the node graph
    (an alias is the node it names, so nothing is expanded); a recursive alias is refused."""
    if root is None:
        return
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    open_: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if isinstance(node, yaml.ScalarNode):
            size[key], depth[key] = 1, 1
            continue
        kids = (
            [x for pair in node.value for x in pair]
            if isinstance(node, yaml.MappingNode)
            else list(node.value)
        )
        if children_done:
            open_.discard(key)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            if size[key] > MAX_NODES:
                raise _LimitError(
                    f"more than {MAX_NODES} values with aliases expanded (refused: an alias bomb?)"
                )
            if depth[key] > MAX_DEPTH:
                raise _LimitError(f"nested deeper than {MAX_DEPTH} levels (refused)")
            continue
        if key in size:
            continue
        if key in open_:
            raise _LimitError("a recursive alias (refused)")
        open_.add(key)
        stack.append((node, True))
        for k in kids:
            if id(k) in open_:
                raise _LimitError("a recursive alias (refused)")
            if id(k) not in size:
                stack.append((k, False))


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error as one line: what, where (never the document's text)."""
    if isinstance(exc, _LimitError):
        return str(exc)
    if isinstance(exc, yaml.MarkedYAMLError):
        where = []
        if exc.problem_mark is not None:
            m = exc.problem_mark
            where.append(f"line {m.line + 1}, column {m.column + 1}")
        if exc.context and exc.context_mark is not None:
            where.append(f"{exc.context} at line {exc.context_mark.line + 1}")
        return f"{exc.problem or 'invalid'} ({'; '.join(where)})" if where else str(exc.problem)
    return " ".join(str(exc).split())[:200]


def safe_yaml(text: str) -> Any:
    """Parse one YAML document with `_ParamsLoader` (limits, duplicate keys, YAML 1.2 scalars).
    Raises `yaml.YAMLError`; `_yaml_problem` turns it into one line."""
    if len(text) > MAX_PARAMS_BYTES:
        raise _LimitError(f"larger than {MAX_PARAMS_BYTES} bytes (refused)")
    loader = _ParamsLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


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
    removed (mbb.agents.personas). The defaults reproduce the personas as they always were."""

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
        "publicly), whatever the persona would do; None: each persona's own choice (as always).",
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
    persona: PersonaName | None = Field(None, description="Scripted negotiation persona.")
    negotiator: NegotiatorBackend | None = Field(None, description="Negotiator backend.")
    solver: SolverBackend | None = Field(None, description="Solver backend.")
    model: str | None = Field(None, description="LLM model config name (llm backends).")
    budget: int | None = Field(None, ge=0, description="Starting credits for this worker.")
    deadline_min: float | None = Field(None, gt=0, description="Deadline in simulated minutes.")
    behaviour: BehaviourKnobs | None = Field(
        None,
        description="Scripted behaviour knobs for this worker; the knobs given here replace "
        "the condition's, the others are the condition's.",
    )


DEFAULT_ROSTER: tuple[PersonaName, ...] = (
    "price_first",
    "deadline_advocate",
    "reciprocator",
    "coalition_builder",
    "shortest_job_advocate",
)


class WorkersParams(_Strict):
    count: int = Field(5, ge=1, le=1000, description="Number of workers N.")
    personas: list[PersonaName] = Field(
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
    negotiator: NegotiatorBackend = Field(
        "scripted", description="Negotiator backend (registered in mbb.protocol.backends)."
    )
    solver: SolverBackend = Field(
        "modeled", description="Solver backend (registered in mbb.protocol.backends)."
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

    enabled: Flag = Field(True, description=_switch_doc("memory.enabled"))
    reports: Flag = Field(True, description=_switch_doc("memory.reports"))
    max_chars: int = Field(
        4000, ge=0, description="Scratch size bound per worker (oldest dropped)."
    )

    @model_serializer(mode="wrap")
    def _new_fields_at_default_left_out(self, handler: Any) -> Any:
        return _defaults_left_out(handler(self), {"reports": True})


class NegotiationParams(_Strict):
    conversation: Flag = Field(True, description=_switch_doc("negotiation.conversation"))
    max_turns: int = Field(3, ge=0, le=50, description="Conversation turns per round.")
    bids: BidsRule = Field("revisable", description=_switch_doc("negotiation.bids"))
    withdrawal: Withdrawal = Field("allowed", description=_switch_doc("negotiation.withdrawal"))
    ballot_reasoning: BallotReasoning = Field(
        "published", description=_switch_doc("negotiation.ballot_reasoning")
    )
    note_max_chars: int = Field(280, ge=0)
    message_max_chars: int = Field(600, ge=1)
    reasoning_max_chars: int = Field(600, ge=0)

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
    kind: MechanismKind = Field(
        "negotiated",
        description="Who decides the schedule (mbb.protocol.rules.MECHANISMS): "
        + MECHANISMS.describe(),
    )
    quantum_s: int = Field(
        60,
        ge=1,
        description="Round-robin time slice, and the per-candidate round budget of "
        "proportional_share (seconds).",
    )
    aggregation: AggregationRule = Field(
        "kemeny",
        description="How ballots become one order; ties by bid, then queue order: "
        + AGGREGATION.describe(),
    )
    payment: PaymentRule = Field(
        "pay_your_bid", description="What a holder pays at window start: " + PAYMENT.describe()
    )
    allocation: AllocationRule = Field(
        "median_ballot", description="Window length: " + ALLOCATION.describe()
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
    model: TimeModel = Field(
        "virtual",
        description="How the subrun clock moves (virtual is the default): "
        + TIME_MODELS.describe(),
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
    persona: PersonaName
    negotiator: NegotiatorBackend
    solver: SolverBackend
    model: str | None
    budget: int
    deadline_s: float
    behaviour: BehaviourKnobs = Field(default_factory=BehaviourKnobs)
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
        value: Any = safe_yaml(raw)
    except _LimitError as exc:
        raise ParamsError(f"--set {key}: value {_short(raw)}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ParamsError(
            f"--set {key}: value {_short(raw)} is not valid YAML: {_yaml_problem(exc)}"
        ) from None
    for part in reversed(parts):
        value = {part: value}
    return value


def _short(value: Any, limit: int = 60) -> str:
    """repr of a value given in input, cut: an error message never echoes a large input."""
    r = repr(value)
    return r if len(r) <= limit else f"{r[: limit - 5]}...{r[-1]}"


def _format_validation_error(source: str, exc: ValidationError) -> str:
    """One line: `source: invalid condition: field: problem (got value); field: ...`."""
    problems = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            parent = _model_at(err["loc"][:-1])
            allowed = ", ".join(sorted(parent.model_fields)) if parent else "see params/base.yaml"
            msg = f"unknown field; allowed here: {allowed}"
        elif err["type"] == "literal_error":
            msg = f"{msg} (got {_short(err.get('input'))})"
        elif "input" in err and not isinstance(err["input"], dict | list):
            msg = f"{msg} (got {_short(err['input'])})"
        msg = msg.removeprefix("Value error, ")
        problems.append(f"{loc}: {' '.join(msg.split())}")
    n = len(problems)
    head = f"{source}: invalid condition" + (f" ({n} problems)" if n > 1 else "")
    return f"{head}: {'; '.join(problems)}"


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
        with path.open("rb") as fh:
            raw = fh.read(MAX_PARAMS_BYTES + 1)
    except OSError as exc:
        raise ParamsError(f"{label}: cannot read: {exc.strerror}") from None
    if len(raw) > MAX_PARAMS_BYTES:
        raise ParamsError(f"{label}: larger than {MAX_PARAMS_BYTES} bytes (refused)")
    try:
        data = safe_yaml(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ParamsError(f"{label}: not UTF-8 text (byte {exc.start})") from None
    except _LimitError as exc:
        raise ParamsError(f"{label}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ParamsError(f"{label}: not valid YAML: {_yaml_problem(exc)}") from None
    except RecursionError:
        raise ParamsError(f"{label}: nested too deeply (refused)") from None
    if data is None or data == {}:
        raise ParamsError(
            f"{label}: empty params file; give at least `name:` (or `extends: base.yaml`)"
        )
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
    (`base`, see `mbb.core.paths`), or the params as a mapping; `overrides`: nested fields merged on
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
