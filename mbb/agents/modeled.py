"""The modeled solver: a task needs W seconds of execution; progress is useful window time.

Work passes through observe -> implement -> compile -> verify (shares of W below). Each window
costs a few seconds of set-up (re-orienting, re-running the build) before useful work starts,
and a worker converts window time to work at its own efficiency (drawn once per run). The
solver releases the resource the moment its task is done. Scores follow from progress:
no test passes before the observe stage is over, then the pass rate rises convexly and reaches
100 % only when all the work is done.
"""

from __future__ import annotations

import math

import numpy as np

from mbb.core.actions import Request, Withdraw
from mbb.core.agent_api import (
    EvaluationResult,
    SolverView,
    TaskAssignment,
    WindowGrant,
    WindowOutcome,
)
from mbb.core.scratch import Scratch

__all__ = ["STAGES", "ModeledSolver", "stage_of", "tests_passed"]

STAGES: tuple[tuple[str, float], ...] = (
    ("observe", 0.15),
    ("implement", 0.50),
    ("compile", 0.15),
    ("verify", 0.20),
)
TESTS_PER_TASK = 40


def stage_of(progress: float) -> str:
    acc = 0.0
    for name, share in STAGES:
        acc += share
        if progress < acc - 1e-12:
            return name
    return "done"


def tests_passed(progress: float, total: int = TESTS_PER_TASK) -> int:
    observe = STAGES[0][1]
    if progress >= 1.0:
        return total
    if progress <= observe:
        return 0
    frac = ((progress - observe) / (1.0 - observe)) ** 1.5
    return min(total - 1, int(total * frac))


class ModeledSolver:
    """Deterministic given its random stream; never touches a real machine."""

    concurrent = False

    def __init__(self, worker: str, rng: np.random.Generator, *, min_s: int, max_s: int) -> None:
        self.worker = worker
        self._rng = rng
        self._min_s = min_s
        self._max_s = max_s
        self.efficiency = float(rng.uniform(0.8, 1.0))
        self.setup_mean_s = 6.0
        self.work_s = 0.0
        self.done_s = 0.0
        self.task_id = ""

    async def start_subrun(self, task: TaskAssignment, scratch: Scratch | None) -> None:
        self.task_id = task.task_id
        self.work_s = task.work_s
        self.done_s = 0.0

    @property
    def done(self) -> bool:
        return self.done_s >= self.work_s > 0

    @property
    def progress(self) -> float:
        if self.done_s >= self.work_s > 0:  # done
            return 1.0
        return self.done_s / self.work_s if self.work_s else 0.0

    def need_s(self) -> float:
        if self.done:
            return 0.0
        return (self.work_s - self.done_s) / self.efficiency + self.setup_mean_s

    def stage_need_s(self) -> float:
        """Seconds to finish the current stage (and the next one too when it is short)."""
        acc, left = 0.0, 0.0
        for _, share in STAGES:
            acc += share * self.work_s
            if self.done_s < acc - 1e-9:
                left = acc - self.done_s
                if left < 0.5 * self._min_s * self.efficiency:
                    continue  # almost through this stage: ask for the next one as well
                break
        return left / self.efficiency + self.setup_mean_s

    async def next_action(self, view: SolverView) -> Request | Withdraw | None:
        """Ask for a window covering the current stage: observe, implement, compile, verify."""
        if self.done_s >= self.work_s > 0:  # done
            return None
        want = math.ceil(self.stage_need_s())
        return Request(duration=max(self._min_s, min(self._max_s, want)))

    async def run_window(self, grant: WindowGrant) -> WindowOutcome:
        length = grant.hard_end_s - grant.start_s
        setup = float(self._rng.uniform(0.5, 1.5)) * self.setup_mean_s
        remaining = self.work_s - self.done_s
        useful = max(0.0, length - setup) * self.efficiency
        if remaining <= useful:
            self.done_s = self.work_s
            used = min(length, setup + remaining / self.efficiency)
            return WindowOutcome(used_s=used, completed=True, released=used < length)
        self.done_s += useful
        return WindowOutcome(used_s=length, completed=False, released=False)

    async def evaluate(self) -> EvaluationResult:
        p = self.progress
        passed = tests_passed(p)
        return EvaluationResult(
            score=passed / TESTS_PER_TASK, passed=passed, total=TESTS_PER_TASK, progress=p
        )
