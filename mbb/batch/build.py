"""One place builds a run: everything the arena is given comes from here.

For one seed of a condition, `run_condition_async`:
1. checks the condition's registered names (`check_condition`: rules, mechanisms, personas,
   backends, models, task catalogues; one line per problem, naming the file and the field)
   and resolves its clock (`resolve_clock`: a `time.model` left at its default becomes
   `charged` wherever a worker is an LLM, `virtual` otherwise);
2. names the run (`run_id_of`: `<condition>[-<model>]-seedNNNN`) and guards its folder (a
   folder holding a run of other parameters is never overwritten);
3. opens the event log (resuming a recorded one when asked);
4. provides the run's services (`RunServices`): the LLM client with its cache and spend ledger
   (shared by the seeds of one batch, `run_seeds`), and on real tasks the task suite with the
   shared execution resource, each created on first use;
5. builds every worker's agents from their registered backends (`mbb.agents.backends`);
6. hands all of it to the arena, runs it, records how it ended and closes what it opened.

`load_params` reads a params file (`mbb.params.read_params`), checks it and resolves its clock
here, so a condition loaded this way is ready to run (and records the clock it runs with); the
CLI, sweeps and notebooks (`mbb.load_params`) use it.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mbb.agents.backends import NEGOTIATORS, SOLVERS, build_agents
from mbb.agents.personas import PERSONAS
from mbb.batch.runs import check_not_foreign, run_id_of
from mbb.core import eventlog
from mbb.core import events as ev
from mbb.core.aio import run_coroutine
from mbb.core.errors import RunStopped, no_surrogates
from mbb.core.registry import Registry
from mbb.llm.budget import unpriced_cap
from mbb.params import Condition, ParamsError, format_problems, read_params
from mbb.protocol.arena import Arena, RunResult
from mbb.protocol.explain import clock_of
from mbb.protocol.rules import (
    AGGREGATION,
    ALLOCATION,
    MECHANISMS,
    PAYMENT,
    SWITCHES,
    TIME_MODELS,
)
from mbb.tasks.modeled import MODELED_TASKS

__all__ = [
    "RunServices",
    "check_condition",
    "ensure_condition",
    "llm_models",
    "load_params",
    "resolve_clock",
    "run_condition",
    "run_condition_async",
    "run_seeds",
]


# --- the condition's names, checked against their registries -----------------------------------
def _name(problems: list[str], registry: Registry[Any], where: str, name: str | None) -> None:
    if name is not None and name not in registry:
        problems.append(f"{where}: {registry.unknown(name)}")


def llm_models(condition: Condition) -> set[str]:
    """The model names (as sent to the endpoints) of the condition's LLM workers."""
    return {
        condition.models[s.model].model
        for s in condition.worker_specs()
        if (NEGOTIATORS[s.negotiator].needs_model or SOLVERS[s.solver].needs_model)
        and s.model in condition.models
    }


def check_condition(condition: Condition) -> list[str]:
    """Every registered name the condition uses that no registry has, and every worker whose
    backends do not fit the condition: one `field: problem` per line (empty: all good)."""
    p: list[str] = []
    mech, neg, w = condition.mechanism, condition.negotiation, condition.workers
    _name(p, MECHANISMS, "mechanism.kind", mech.kind)
    _name(p, AGGREGATION, "mechanism.aggregation", mech.aggregation)
    _name(p, PAYMENT, "mechanism.payment", mech.payment)
    _name(p, ALLOCATION, "mechanism.allocation", mech.allocation)
    for key, value in (
        ("negotiation.bids", neg.bids),
        ("negotiation.withdrawal", neg.withdrawal),
        ("negotiation.ballot_reasoning", neg.ballot_reasoning),
    ):
        _name(p, SWITCHES[key], key, value)
    _name(p, TIME_MODELS, "time.model", condition.time.model)
    for i, persona in enumerate(w.personas):
        _name(p, PERSONAS, f"workers.personas.{i}", persona)
    _name(p, NEGOTIATORS, "workers.negotiator", w.negotiator)
    _name(p, SOLVERS, "workers.solver", w.solver)
    overrides = [(f"workers.overrides.{k}", o) for k, o in w.overrides.items()]
    for j, change in enumerate(condition.population_changes):
        overrides += [(f"population_changes.{j}.add.{i}", o) for i, o in enumerate(change.add)]
    for where, o in overrides:
        _name(p, PERSONAS, f"{where}.persona", o.persona)
        _name(p, NEGOTIATORS, f"{where}.negotiator", o.negotiator)
        _name(p, SOLVERS, f"{where}.solver", o.solver)
    if p:  # the workers' backends below are only meaningful once every name is known
        return p
    kind = condition.tasks.kind
    for s in condition.worker_specs():
        needs_model = NEGOTIATORS[s.negotiator].needs_model or SOLVERS[s.solver].needs_model
        if needs_model and s.model not in condition.models:
            known = ", ".join(sorted(condition.models)) or "none defined"
            p.append(
                f"workers: worker {s.id} uses an llm backend but its model {s.model!r} is not "
                f"an entry of `models` ({known})"
            )
        wants = SOLVERS[s.solver].tasks
        if wants != kind:
            p.append(
                f"workers: worker {s.id}: solver {s.solver!r} needs tasks.kind: {wants} "
                f"(got {kind!r})"
            )
    cap = condition.llm.max_cost_usd
    if cap is not None:
        why = unpriced_cap(f"llm.max_cost_usd ({cap:g})", llm_models(condition), condition.prices)
        if why is not None:
            p.append(why)
    if condition.tasks.suite:
        if kind == "modeled":
            known_tasks = {t.task_id for t in MODELED_TASKS}
        else:
            from mbb.tasks.specs import TASK_SPECS

            known_tasks = set(TASK_SPECS)
        unknown = sorted(set(condition.tasks.suite) - known_tasks)
        if unknown:
            p.append(f"tasks.suite: unknown {kind} task(s) {unknown}; known: {sorted(known_tasks)}")
    return p


def uses_llm_backend(condition: Condition) -> bool:
    """Whether some worker's negotiator or solver backend needs a model (an LLM worker)."""
    return any(
        NEGOTIATORS[s.negotiator].needs_model or SOLVERS[s.solver].needs_model
        for s in condition.worker_specs()
    )


def resolve_clock(condition: Condition) -> Condition:
    """`condition` with its clock resolved: `time.model` as given; left at its default (None),
    `charged` wherever a worker is an LLM (the paper's clock: the deadline ticks while an agent
    thinks, pausing only for negotiation) and `virtual` for scripted populations (their runs
    then stay deterministic and machine-independent). Its backends must be registered names."""
    if condition.time.model is not None:
        return condition
    model = "charged" if uses_llm_backend(condition) else "virtual"
    time = condition.time.model_copy(update={"model": model})
    return condition.model_copy(update={"time": time})


def ensure_condition(condition: Condition, source: str = "<params>") -> Condition:
    """The condition with its clock resolved (`resolve_clock`), if `check_condition` finds
    nothing; else a ParamsError naming `source` (the params file it was read from) and every
    problem on one line."""
    problems = check_condition(condition)
    if problems:
        raise ParamsError(format_problems(source, problems))
    return resolve_clock(condition)


def load_params(
    source: str | Path | Mapping[str, Any], overrides: Mapping[str, Any] | None = None
) -> Condition:
    """Read a condition (`mbb.params.read_params`: a path relative to the current directory, a
    bare name of one of mbb's conditions, or a mapping; `overrides` deep-merged on top) and
    check its registered names: a condition ready to run. Raises ParamsError (one line)."""
    label = "<params>" if isinstance(source, Mapping) else str(source)
    return ensure_condition(read_params(source, overrides), label)


# --- names and services of one run ---------------------------------------------------------------
LlmPair = tuple[Any, Any]  # (LlmClient, LlmCache)


def open_llm(condition: Condition, on_call: Callable[..., Any] | None = None) -> LlmPair:
    """A new LLM client (its prices and spend ledger from the condition; its endpoints stop
    after too many failures, `mbb.llm.limits.EndpointBreaker`) and request cache.

    condition: the condition run; on_call: told of every audited call (progress per call)."""
    from mbb.core.validity import INVALID_SHARE
    from mbb.llm.budget import ledger_for
    from mbb.llm.cache import LlmCache
    from mbb.llm.client import LlmClient

    p = condition.llm
    budget = ledger_for(p.max_cost_usd, p.max_tokens_total)
    return (
        LlmClient(
            prices=condition.prices,
            budget=budget,
            on_call=on_call,
            # an endpoint failing more often than a valid run may (in a row or not) stops, as in
            # a study (which passes its own failures.invalid_share)
            stop_share=INVALID_SHARE,
            # every key variable of the params: its value is redacted wherever an answer has it
            secret_envs=[m.api_key_env for m in condition.models.values() if m.api_key_env],
        ),
        LlmCache(p.cache_path() if p.cache != "off" else None, p.cache),
    )


class RunServices:
    """What one run offers its agents (`mbb.agents.backends.Services`): the condition, the
    log's validating emit, the LLM client and cache (given when shared by a batch, else opened
    on first use and closed with the run), and on real tasks the task suite and the execution
    resource (workspaces in the run folder, or a temporary one), created on first use."""

    def __init__(
        self, condition: Condition, log: eventlog.EventLog, llm: LlmPair | None = None
    ) -> None:
        self.condition = condition
        self.log = log
        self.emit: Callable[..., Any] = log.emit
        self._llm = llm
        self._owns_llm = llm is None
        self.resource: Any = None
        self.suite: Any = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def llm(self) -> LlmPair:
        if self._llm is None:
            self._llm = open_llm(self.condition)
        return self._llm

    def tasks(self) -> tuple[Any, Any]:
        if self.resource is None:
            from mbb.resource.resource import ExecutionResource
            from mbb.tasks.suite import build_suite

            self.suite = build_suite(tasks=self.condition.tasks.suite or None)
            if self.log.path is not None:
                root = self.log.path.parent / "resource"
            else:
                self._tmp = tempfile.TemporaryDirectory(prefix="mbb-resource-")
                root = Path(self._tmp.name)
            self.resource = ExecutionResource(
                root,
                emit=self.log.emit,
                # a registered time model (mbb.protocol.rules.TIME_MODELS); the resource charges
                # commands by virtual or measured time ("charged" adds the solver's own time)
                time_model=clock_of(self.condition),  # type: ignore[arg-type]
                reference_mode=self.condition.tasks.reference_mode,
            )
        return self.resource, self.suite

    async def aclose(self) -> None:
        """Close what this run opened (a shared LLM client and cache are the batch's)."""
        try:
            if self._owns_llm and self._llm is not None:
                await self._llm[0].aclose()  # the run's endpoint connections
                self._llm[1].close()
        finally:
            if self.resource is not None:
                self.resource.close()
            if self._tmp is not None:
                self._tmp.cleanup()


def build_arena(
    condition: Condition,
    seed: int,
    log: eventlog.EventLog,
    services: RunServices,
    *,
    negotiators: Mapping[str, Callable[..., Any]] | None = None,
    solvers: Mapping[str, Callable[..., Any]] | None = None,
) -> Arena:
    """The arena of one seed with its agents built from their backends (`negotiators` /
    `solvers`: factories by backend name replacing the registered ones, for tests)."""
    agents = build_agents(
        services, condition.worker_specs(seed), seed, negotiators=negotiators, solvers=solvers
    )
    if condition.tasks.kind == "real":
        services.tasks()
    return Arena(condition, seed, log, agents, resource=services.resource, suite=services.suite)


# --- running -------------------------------------------------------------------------------------
async def run_condition_async(
    condition: Condition,
    seed: int | None = None,
    out_dir: Path | None = None,
    *,
    resume: bool = False,
    llm: LlmPair | None = None,
    negotiators: Mapping[str, Callable[..., Any]] | None = None,
    solvers: Mapping[str, Callable[..., Any]] | None = None,
) -> RunResult:
    """One seed of a condition on the running event loop (see the module docstring).

    `seed`: default the condition's; `out_dir`: events stream to out_dir/<run_id>/ (None: in
    memory); `resume`: continue a run whose log is there (its events are verified, not
    rewritten; LLM calls already made come from the cache); `llm`: (LlmClient, LlmCache) shared
    with other runs; `negotiators` / `solvers`: backend factories replacing the registered ones."""
    condition = ensure_condition(condition)
    seed = condition.seed if seed is None else seed
    run_id = run_id_of(condition, seed)
    run_dir = out_dir / run_id if out_dir is not None else None
    if run_dir is not None and not resume:
        check_not_foreign(run_dir, condition)  # never overwrite another condition's run
    log = eventlog.EventLog(run_id, run_dir / "events.jsonl" if run_dir else None, resume=resume)
    result = RunResult(run_id, seed, run_dir, log)
    services = RunServices(condition, log, llm)
    try:
        try:
            arena = build_arena(
                condition, seed, log, services, negotiators=negotiators, solvers=solvers
            )
            await arena.run()
        finally:
            await services.aclose()
    except RunStopped as exc:  # a spend cap, an endpoint down: a recorded stop, resumable
        result.status, result.error = "stopped", _redacted(condition, str(exc))
        log.emit(ev.RunEnded, status="stopped", error=result.error[:2000])
    except Exception as exc:
        result.status, result.error = "failed", _redacted(condition, f"{type(exc).__name__}: {exc}")
        log.emit(ev.RunEnded, status="failed", error=result.error[:2000])
        raise
    finally:
        log.close()
    return result


def _redacted(condition: Condition, text: str) -> str:
    """An error's text as a run records it (`run_ended`): the values of the condition's key
    variables cut out, lone surrogates replaced; behind the provider's own redaction, for a
    text that reached the run by another way (F1 of red team rt37)."""
    from mbb.llm.redact import Redactor, key_values

    names = [m.api_key_env for m in condition.models.values() if m.api_key_env]
    return no_surrogates(Redactor(key_values(names)).text(text) or "")


def run_condition(
    condition: Condition,
    seed: int | None = None,
    out_dir: Path | None = None,
    *,
    resume: bool = False,
    negotiators: Mapping[str, Callable[..., Any]] | None = None,
    solvers: Mapping[str, Callable[..., Any]] | None = None,
) -> RunResult:
    """Run one seed of a condition to its end (also from inside a running loop, a Jupyter
    kernel); see `run_condition_async` for the arguments."""
    box: list[RunResult] = []

    async def go() -> None:
        box.append(
            await run_condition_async(
                condition, seed, out_dir, resume=resume, negotiators=negotiators, solvers=solvers
            )
        )

    run_coroutine(go)
    return box[0]


def run_seeds(
    condition: Condition,
    seeds: Sequence[int],
    out_dir: Path | None = None,
    *,
    on_call: Callable[..., Any] | None = None,
    on_run: Callable[[], Any] | None = None,
) -> list[RunResult | BaseException]:
    """Several seeds on ONE event loop: their LLM calls share one client (so one concurrency
    limit per endpoint, i.e. one rate limit) and one cache. Each run keeps its own log, so
    every run's events are the same as when it runs alone. A failed run is returned as its
    exception (it is recorded in its own log); the others go on.

    condition, seeds, out_dir: what to run and where; on_call: told of every LLM call as it
    ends (`LlmClient`'s `on_call`); on_run: told when a run ends, finished or failed."""
    box: list[list[RunResult | BaseException]] = []

    async def one(seed: int, shared: LlmPair) -> RunResult:
        try:
            result = await run_condition_async(condition, seed, out_dir, llm=shared)
        except Exception:  # a failed run ended too (a cancelled one did not)
            if on_run is not None:
                on_run()
            raise
        if on_run is not None:
            on_run()
        return result

    async def go() -> None:
        shared = open_llm(condition, on_call)
        try:
            box.append(
                await asyncio.gather(*(one(s, shared) for s in seeds), return_exceptions=True)
            )
        finally:
            await shared[0].aclose()
            shared[1].close()

    run_coroutine(go)
    return box[0]
