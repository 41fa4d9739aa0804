"""The modeled solver: progress is useful window time; it releases the moment it is done."""

from __future__ import annotations

import asyncio

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
