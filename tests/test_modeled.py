"""The modeled solver: progress is useful window time; it releases the moment it is done."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mbb.agents import modeled
from mbb.agents.modeled import STAGES, TESTS_PER_TASK, ModeledSolver, stage_of
from mbb.core.actions import Request
from mbb.core.agent_api import SolverView, TaskAssignment, WindowGrant


def _solver(work: float = 200.0, seed: int = 0) -> ModeledSolver:
    s = ModeledSolver("W1", np.random.default_rng(seed), min_s=30, max_s=300)
    asyncio.run(s.start_subrun(TaskAssignment("rev", work, 1), None))
    return s


def _window(s: ModeledSolver, start: float, length: float, deadline: float = 1e9):
    grant = WindowGrant("W1", 1, 1, start, int(length), min(start + length, deadline))
    return asyncio.run(s.run_window(grant))


def test_progress_accumulates_and_the_solver_releases_when_done() -> None:
    s = _solver(work=200)
    assert s.progress == 0 and not s.done
    first = _window(s, 0, 100)
    assert first.used_s == 100 and not first.completed and not first.released
    assert 0 < s.progress < 1
    last = None
    t = 100.0
    while not s.done:
        last = _window(s, t, 300)
        t += last.used_s
    assert last is not None and last.completed and last.released and last.used_s < 300
    assert s.progress == 1.0 and s.need_s() == 0.0
    assert asyncio.run(s.next_action(SolverView("W1", 1, t, 1e9, 30, 300))) is None
    result = asyncio.run(s.evaluate())
    assert result.resolved and result.passed == result.total == TESTS_PER_TASK


def test_a_window_cut_by_the_deadline_uses_only_time_before_it() -> None:
    s = _solver(work=1000)
    out = _window(s, 50, 300, deadline=120)
    assert out.used_s == 70 and not out.completed


def test_request_is_within_window_bounds() -> None:
    for work in (1, 100, 10_000):
        s = _solver(work=work)
        req = asyncio.run(s.next_action(SolverView("W1", 1, 0, 1e9, 30, 300)))
        assert isinstance(req, Request) and 30 <= req.duration <= 300


@settings(max_examples=100, deadline=None, database=None)
@given(st.lists(st.floats(0, 1), min_size=2, max_size=20))
def test_tests_passed_rises_with_progress_and_is_full_only_at_the_end(ps) -> None:
    ps = sorted(ps)
    passed = [modeled.tests_passed(p) for p in ps]  # not imported bare: pytest would collect it
    assert passed == sorted(passed)
    for p, n in zip(ps, passed, strict=True):
        assert (n == TESTS_PER_TASK) == (p >= 1.0)
        if p <= STAGES[0][1]:
            assert n == 0


@pytest.mark.parametrize(
    ("progress", "stage"),
    [
        (0.0, "observe"),
        (0.149, "observe"),
        (0.15, "implement"),
        (0.64, "implement"),
        (0.65, "compile"),
        (0.8, "verify"),
        (0.999, "verify"),
        (1.0, "done"),
    ],
)
def test_stage_of(progress, stage) -> None:
    assert stage_of(progress) == stage


# --- F-1: the request is an estimate where a language model reads it -----------------------------
def _estimating(seed: int, work: float = 200.0, **kw) -> ModeledSolver:
    s = ModeledSolver(
        "W1",
        np.random.default_rng(seed),
        min_s=kw.get("min_s", 30),
        max_s=kw.get("max_s", 300),
        estimate_log_sd=modeled.ESTIMATE_LOG_SD,
    )
    asyncio.run(s.start_subrun(TaskAssignment("rev", work, 1), None))
    return s


def _requests_and_needs(s: ModeledSolver, max_s: int) -> list[tuple[int, float]]:
    view = SolverView("W1", 1, 0, 1e9, 1, max_s)
    out, t = [], 0.0
    while not s.done:
        req = asyncio.run(s.next_action(view))
        assert isinstance(req, Request)
        out.append((req.duration, s.stage_need_s()))
        t += _window(s, t, min(req.duration, 400)).used_s
    return out


def test_an_estimating_solver_requests_an_estimate_within_the_stated_factor() -> None:
    """F-1: the request shown to an LLM negotiator is not the true stage need."""
    exact = off = 0
    bound = modeled.ESTIMATE_MAX_FACTOR
    for seed in range(20):
        s = _estimating(seed, work=2000, min_s=1, max_s=100_000)  # no clamping
        for asked, true in _requests_and_needs(s, 100_000):
            assert 1 / bound - 0.01 <= asked / true <= bound + 0.01
            exact += asked == math.ceil(true)
            off += abs(asked / true - 1) > 0.02
    assert off > exact  # mostly not exact
    # reproducible by seed: the same seed asks for the same windows
    view = SolverView("W1", 1, 0, 1e9, 30, 300)
    a, b = _estimating(7), _estimating(7)
    assert asyncio.run(a.next_action(view)) == asyncio.run(b.next_action(view))


def test_the_estimate_is_drawn_once_per_stage() -> None:
    s = _estimating(1, work=2000)
    first = s.estimate_factor()
    assert s.estimate_factor() == first  # the same stage: the same error
    asyncio.run(s.start_subrun(TaskAssignment("next", 2000, 2), None))  # a new task: a new draw
    assert s.estimate_factor() != first


def test_the_estimate_is_not_systematically_biased() -> None:
    factors = np.array([_estimating(seed).estimate_factor() for seed in range(400)])
    logs = np.log(factors)
    assert abs(float(np.median(factors)) - 1) < 0.05 and abs(float(logs.mean())) < 0.05
    assert 0.15 < float(logs.std()) < 0.3


def test_the_estimation_error_leaves_the_set_up_draws_unchanged() -> None:
    """The errors come from a child stream: the parent generator's draws are as before."""
    rng = np.random.default_rng(3)
    s = ModeledSolver("W1", rng, min_s=30, max_s=300, estimate_log_sd=modeled.ESTIMATE_LOG_SD)
    asyncio.run(s.start_subrun(TaskAssignment("rev", 200, 1), None))
    asyncio.run(s.next_action(SolverView("W1", 1, 0, 1e9, 30, 300)))
    ref = np.random.default_rng(3)
    assert s.efficiency == ref.uniform(0.8, 1.0)
    assert rng.uniform() == ref.uniform()


def test_by_default_the_request_is_exact_and_no_stream_is_spawned() -> None:
    """A solver under a scripted negotiator: exactly the request it made before F-1."""
    rng = np.random.default_rng(5)
    s = ModeledSolver("W1", rng, min_s=1, max_s=100_000)
    asyncio.run(s.start_subrun(TaskAssignment("rev", 2000, 1), None))
    assert s.estimate_log_sd == 0 and s.settings == {"estimate_log_sd": 0.0}
    assert all(asked == math.ceil(true) for asked, true in _requests_and_needs(s, 100_000))
    assert rng.bit_generator.seed_seq.n_children_spawned == 0
    with pytest.raises(ValueError):
        ModeledSolver("W1", rng, min_s=1, max_s=2, estimate_log_sd=-0.1)


class _Services:
    def __init__(self, condition) -> None:
        self.condition = condition

    def emit(self, *a, **kw) -> None:
        return None

    def llm(self):
        raise AssertionError("no LLM client here")

    def tasks(self):
        raise AssertionError("modeled tasks only")


def _built_solvers(path: str, over: dict | None = None) -> dict[str, ModeledSolver]:
    from mbb.agents.backends import build_agents
    from mbb.batch.build import load_params

    root = Path(__file__).resolve().parents[1]
    cond = load_params(root / "params" / path, over)
    stub = {"llm": lambda run, spec, rng: None, "scripted": lambda run, spec, rng: None}
    agents = build_agents(_Services(cond), cond.worker_specs(0), 0, negotiators=stub)
    solvers = {w: sol for w, (_, sol) in agents.items()}
    assert all(isinstance(s, ModeledSolver) for s in solvers.values())
    return solvers  # type: ignore[return-value]


def test_llm_negotiators_get_estimating_solvers_and_scripted_ones_exact_solvers() -> None:
    """mbb's choice (F-1): the error where the negotiator is a language model, nowhere else."""
    llm = _built_solvers("llm_negotiators.yaml")
    assert {s.estimate_log_sd for s in llm.values()} == {modeled.ESTIMATE_LOG_SD}
    scripted = _built_solvers("base.yaml")
    assert {s.estimate_log_sd for s in scripted.values()} == {0.0}
    # a mixed population: the worker with a scripted negotiator keeps the exact request
    mixed = _built_solvers(
        "llm_negotiators.yaml", {"workers": {"overrides": {"W2": {"negotiator": "scripted"}}}}
    )
    assert mixed["W2"].estimate_log_sd == 0.0
    assert {s.estimate_log_sd for w, s in mixed.items() if w != "W2"} == {modeled.ESTIMATE_LOG_SD}


def test_a_scripted_run_records_exact_requests_per_worker() -> None:
    from mbb.batch.build import load_params, run_condition

    root = Path(__file__).resolve().parents[1]
    cond = load_params(root / "params" / "base.yaml", {"subruns": 1})
    start = json.loads(run_condition(cond, 0, None).log.lines[0])
    assert start["kind"] == "run_started"
    assert [w["solver_settings"] for w in start["workers"]] == [{"estimate_log_sd": 0.0}] * len(
        start["workers"]
    )
