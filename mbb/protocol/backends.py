"""Agent backends by name: the factories the arena builds each worker's negotiator and solver
with. The params model takes its backend choices from these names, so a misspelt backend is
refused when params load (one line listing the valid ones), not when the run starts.

A factory is `(arena, worker spec, rng) -> agent`; it imports its backend on first use, so
loading params stays light. An `Arena` can also be given its own mapping (`backends=`), and
tests may replace an entry for the duration of a test.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from mbb.core.agent_api import Negotiator, Solver
    from mbb.params import WorkerSpec
    from mbb.protocol.arena import Arena

__all__ = [
    "NEGOTIATOR_BACKENDS",
    "SOLVER_BACKENDS",
    "NegotiatorFactory",
    "RngSource",
    "SolverFactory",
]

RngSource = Callable[[], "np.random.Generator"]  # the same generator on every call
SolverFactory = Callable[["Arena", "WorkerSpec", "np.random.Generator"], "Solver"]
NegotiatorFactory = Callable[["Arena", "WorkerSpec", RngSource], "Negotiator"]


def _modeled_solver(arena: Arena, spec: WorkerSpec, rng: np.random.Generator) -> Solver:
    from mbb.agents.modeled import ModeledSolver

    w = arena.condition.windows
    return ModeledSolver(spec.id, rng, min_s=w.min_s, max_s=w.max_s)


def _scripted_negotiator(arena: Arena, spec: WorkerSpec, rng: RngSource) -> Negotiator:
    from mbb.agents.personas import make_scripted_negotiator

    return make_scripted_negotiator(spec.id, spec.persona, rng, spec.behaviour)


def _oracle_solver(arena: Arena, spec: WorkerSpec, rng: np.random.Generator) -> Solver:
    from mbb.agents.oracle import make_oracle_solver

    resource, suite = arena.real_tasks()
    return make_oracle_solver(
        spec.id,
        suite=suite,
        resource=resource,
        emit=arena.log.emit,
        time_model=arena.condition.time.model,
        rng=random.Random(int(rng.integers(2**31))),
    )


def _llm_negotiator(arena: Arena, spec: WorkerSpec, rng: RngSource) -> Negotiator:
    from mbb.agents.llm_negotiator import negotiator_backend

    assert spec.model is not None  # params: an llm worker names a model
    return negotiator_backend(*arena.llm_context())(arena, spec, rng)


def _llm_solver(arena: Arena, spec: WorkerSpec, rng: np.random.Generator) -> Solver:
    from mbb.agents.llm_solver import make_llm_solver

    resource, suite = arena.real_tasks()
    llm, cache = arena.llm_context()
    cond = arena.condition
    assert spec.model is not None  # params: an llm worker names a model
    return make_llm_solver(
        spec.id,
        config=cond.models[spec.model],
        llm=llm,
        suite=suite,
        resource=resource,
        emit=arena.log.emit,
        cache=cache,
        loop=cond.llm.solver,
        window_min_s=cond.windows.min_s,
        window_max_s=cond.windows.max_s,
        n_others=len(arena.specs) - 1,
        time_model=cond.time.model,
    )


SOLVER_BACKENDS: dict[str, SolverFactory] = {
    "modeled": _modeled_solver,
    "oracle": _oracle_solver,
    "llm": _llm_solver,
}
NEGOTIATOR_BACKENDS: dict[str, NegotiatorFactory] = {
    "scripted": _scripted_negotiator,
    "llm": _llm_negotiator,
}
