"""Agent backends by name, and the one function that builds a run's agents from them.

A condition names each worker's negotiator and solver backend as a string (`mbb.params`); the
run builder (`mbb.batch.build`) checks the names against these registries and builds the agents
with `build_agents`, handing each factory the run's `Services` (the condition, the event log's
validating emit, and on demand the LLM client with its cache and the task suite with the
shared execution resource). A backend imports its implementation on first use, so naming
backends stays light.

To add a backend: write its factory here and register it; it becomes a valid
`workers.negotiator` / `workers.solver` value, checked when a run is built.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from mbb.core.registry import Registry

if TYPE_CHECKING:
    from mbb.core.agent_api import Negotiator, Solver
    from mbb.params import Condition, WorkerSpec

__all__ = [
    "NEGOTIATORS",
    "SOLVERS",
    "Backend",
    "NegotiatorFactory",
    "RngSource",
    "Services",
    "SolverFactory",
    "build_agents",
    "lazy_worker_rng",
    "llm_solvers",
    "modeled_estimate_log_sd",
    "uses_llm",
    "worker_rng",
]


class Services(Protocol):
    """What a run offers the factories of its agents (implemented by `mbb.batch.build`)."""

    @property
    def condition(self) -> Condition: ...

    def emit(self, kind: Any, worker: str | None = None, /, **payload: Any) -> None:
        """Record a validated event in the run's log."""

    def llm(self) -> tuple[Any, Any]:
        """The run's (LlmClient, LlmCache): one client and one cache per run (or batch)."""

    def tasks(self) -> tuple[Any, Any]:
        """The (ExecutionResource, Suite) of a real-task run, created on first use."""


RngSource = Callable[[], np.random.Generator]  # the same generator on every call
SolverFactory = Callable[["Services", "WorkerSpec", np.random.Generator], "Solver"]
NegotiatorFactory = Callable[["Services", "WorkerSpec", RngSource], "Negotiator"]


@dataclass(frozen=True, slots=True)
class Backend:
    """One backend: its name, what it is, how to build it; `needs_model`: its worker names a
    model config (an LLM backend); `tasks`: the task kind a solver works on (None: a
    negotiator)."""

    name: str
    summary: str
    build: Callable[..., Any]
    needs_model: bool = False
    tasks: Literal["modeled", "real"] | None = None


def worker_rng(seed: int, index: int, role: int) -> np.random.Generator:
    """Independent stream per (run seed, worker index, role); role 0 negotiator, 1 solver."""
    return np.random.default_rng(np.random.SeedSequence(entropy=seed, spawn_key=(index, role)))


def lazy_worker_rng(seed: int, index: int, role: int) -> RngSource:
    """`worker_rng`, seeded on the first call: seeding costs ~15 µs, and a negotiator under a
    centralized scheduler without bids never draws."""
    return functools.cache(functools.partial(worker_rng, seed, index, role))


def modeled_estimate_log_sd(spec: WorkerSpec) -> float:
    """The estimation error a modeled solver of `spec` requests its windows with (mbb's
    choice, `mbb.agents.modeled`): `ESTIMATE_LOG_SD` when the worker's negotiator is a language
    model (a backend that needs a model), the only reader for whom the request is information;
    0 (the exact request) with a scripted negotiator, which reads the true need anyway and
    whose validated population must not move."""
    from mbb.agents.modeled import ESTIMATE_LOG_SD

    llm = spec.negotiator in NEGOTIATORS and NEGOTIATORS[spec.negotiator].needs_model
    return ESTIMATE_LOG_SD if llm else 0.0


def _modeled_solver(run: Services, spec: WorkerSpec, rng: np.random.Generator) -> Solver:
    from mbb.agents.modeled import ModeledSolver

    w = run.condition.windows
    return ModeledSolver(
        spec.id,
        rng,
        min_s=w.min_s,
        max_s=w.max_s,
        estimate_log_sd=modeled_estimate_log_sd(spec),
    )


def _scripted_negotiator(run: Services, spec: WorkerSpec, rng: RngSource) -> Negotiator:
    from mbb.agents.personas import make_scripted_negotiator

    return make_scripted_negotiator(spec.id, spec.persona, rng, spec.behaviour)


def _oracle_solver(run: Services, spec: WorkerSpec, rng: np.random.Generator) -> Solver:
    from mbb.agents.oracle import make_oracle_solver
    from mbb.protocol.explain import clock_of

    resource, suite = run.tasks()
    return make_oracle_solver(
        spec.id,
        suite=suite,
        resource=resource,
        emit=run.emit,
        time_model=clock_of(run.condition),
        rng=random.Random(int(rng.integers(2**31))),
    )


def _llm_negotiator(run: Services, spec: WorkerSpec, rng: RngSource) -> Negotiator:
    from mbb.agents.negotiator import LlmNegotiator

    cond = run.condition
    assert spec.model is not None  # checked by the builder: an llm worker names a model
    llm, cache = run.llm()
    return LlmNegotiator(
        spec.id,
        config=cond.models[spec.model],
        llm=llm,
        emit=run.emit,
        cache=cache,
        condition=cond,
        llm_solvers=llm_solvers(cond),
    )


def _llm_solver(run: Services, spec: WorkerSpec, rng: np.random.Generator) -> Solver:
    from mbb.agents.llm_solver import make_llm_solver
    from mbb.protocol.explain import clock_of

    resource, suite = run.tasks()
    llm, cache = run.llm()
    cond = run.condition
    assert spec.model is not None  # checked by the builder: an llm worker names a model
    return make_llm_solver(
        spec.id,
        config=cond.models[spec.model],
        llm=llm,
        suite=suite,
        resource=resource,
        emit=run.emit,
        cache=cache,
        loop=cond.llm.solver,
        window_min_s=cond.windows.min_s,
        window_max_s=cond.windows.max_s,
        n_others=len(cond.worker_specs()) - 1,
        time_model=clock_of(cond),
        condition=cond,
    )


NEGOTIATORS: Registry[Backend] = Registry(
    "negotiator backend",
    [
        Backend("scripted", "a persona of mbb.agents.personas", _scripted_negotiator),
        Backend("llm", "an LLM through the worker's model config", _llm_negotiator, True),
    ],
)
SOLVERS: Registry[Backend] = Registry(
    "solver backend",
    [
        Backend("modeled", "modeled work (mbb.agents.modeled)", _modeled_solver, tasks="modeled"),
        Backend("oracle", "replays a task's reference solution", _oracle_solver, tasks="real"),
        Backend("llm", "an LLM tool loop on the real task", _llm_solver, True, "real"),
    ],
)


def uses_llm(condition: Condition) -> bool:
    """Whether any worker of `condition` has a backend that needs a model (an LLM worker)."""
    return any(
        NEGOTIATORS[s.negotiator].needs_model or SOLVERS[s.solver].needs_model
        for s in condition.worker_specs()
        if s.negotiator in NEGOTIATORS and s.solver in SOLVERS
    )


def llm_solvers(condition: Condition) -> bool | None:
    """Whether every worker's solver is a language model (True), none is (False), or some are
    (None): what the rules say about model time on a `charged` clock
    (`mbb.protocol.explain.explain`)."""
    kinds = {SOLVERS[s.solver].needs_model for s in condition.worker_specs()}
    return next(iter(kinds)) if len(kinds) == 1 else None


def build_agents(
    run: Services,
    specs: Sequence[WorkerSpec],
    seed: int,
    *,
    negotiators: Mapping[str, Callable[..., Negotiator]] | None = None,
    solvers: Mapping[str, Callable[..., Solver]] | None = None,
) -> dict[str, tuple[Negotiator, Solver]]:
    """Each worker's (negotiator, solver), in worker order, from its backends' factories.

    `run`: the run's services; `specs`: the workers (`Condition.worker_specs(seed)`); `seed`:
    the run's seed (each agent draws from its own stream, `worker_rng`); `negotiators` /
    `solvers`: factories by backend name that replace the registered ones (tests, replays)."""
    out: dict[str, tuple[Negotiator, Solver]] = {}
    for spec in specs:
        neg = (negotiators or {}).get(spec.negotiator) or NEGOTIATORS[spec.negotiator].build
        sol = (solvers or {}).get(spec.solver) or SOLVERS[spec.solver].build
        out[spec.id] = (
            neg(run, spec, lazy_worker_rng(seed, spec.index, 0)),
            sol(run, spec, worker_rng(seed, spec.index, 1)),
        )
    return out
