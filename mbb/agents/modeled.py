"""The modeled solver: a task needs W seconds of execution; progress is useful window time.

Work passes through observe -> implement -> compile -> verify (shares of W below). Each window
costs a few seconds of set-up (re-orienting, re-running the build) before useful work starts,
and a worker converts window time to work at its own efficiency (drawn once per run). The
solver releases the resource the moment its task is done. Scores follow from progress:
no test passes before the observe stage is over, then the pass rate rises convexly and reaches
100 % only when all the work is done.

The window request. A modeled solver computes its need from hidden state (the task's true work
W, the worker's efficiency, exact progress), and the request is shown to the worker's
negotiator ("your solver asked for a N-second window"). For a language-model negotiator that
exact number would be a free oracle on the job's true size, which a real solver only estimates.
mbb's choice (the paper is silent on how a modeled solver estimates): the estimation error
applies only where the request is information, i.e. to a modeled solver whose worker's
negotiator is a language model. `mbb.agents.backends` builds those with `estimate_log_sd` =
`ESTIMATE_LOG_SD` (0.25); a modeled solver paired with a scripted negotiator keeps the exact
request (`estimate_log_sd` 0), because scripted personas read the true need directly anyway and
the scripted population is the validated fixture whose planted behaviour must not move. With
`estimate_log_sd` > 0, when a stage starts the solver draws one multiplicative error for it,
log-normal with median 1 and that log-sd, truncated to within a factor of `ESTIMATE_MAX_FACTOR`
(2) either way; each request in that stage is the true stage need times that factor. The draws
come from a child stream spawned off the solver's own generator, so a run stays reproducible by
its seed and the efficiency and window set-up draws are the same as without the error (with 0
no stream is spawned at all). `need_s()`/`stage_need_s()` stay exact. The resolved value is
recorded per worker in the run's `run_started` event (`solver_settings`).
"""

from __future__ import annotations

import math
from typing import Any

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

__all__ = [
    "ESTIMATE_LOG_SD",
    "ESTIMATE_MAX_FACTOR",
    "STAGES",
    "ModeledSolver",
    "stage_of",
    "tests_passed",
]

STAGES: tuple[tuple[str, float], ...] = (
    ("observe", 0.15),
    ("implement", 0.50),
    ("compile", 0.15),
    ("verify", 0.20),
)
TESTS_PER_TASK = 40
# the per-stage estimation error of a modeled solver whose negotiator is a language model
ESTIMATE_LOG_SD = 0.25  # its spread (log scale)
ESTIMATE_MAX_FACTOR = 2.0  # the error never exceeds this factor either way


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
    """Deterministic given its random stream; never touches a real machine.

    `estimate_log_sd`: the spread (log scale) of the per-stage estimation error on its window
    requests; 0 (the default) asks for the exact stage need (see the module docstring: mbb
    gives the error only to a solver whose negotiator is a language model)."""

    concurrent = False

    def __init__(
        self,
        worker: str,
        rng: np.random.Generator,
        *,
        min_s: int,
        max_s: int,
        estimate_log_sd: float = 0.0,
    ) -> None:
        if not estimate_log_sd >= 0:
            raise ValueError(f"estimate_log_sd must be >= 0, got {estimate_log_sd}")
        self.worker = worker
        self._rng = rng
        self._min_s = min_s
        self._max_s = max_s
        self.estimate_log_sd = float(estimate_log_sd)
        self.efficiency = float(rng.uniform(0.8, 1.0))
        # a child stream: the estimation errors leave the parent's draws (set-up times) unchanged;
        # none when the request is exact, so such a solver is exactly as without the error
        self._estimate_rng = rng.spawn(1)[0] if self.estimate_log_sd > 0 else None
        self._estimate: tuple[int, float] | None = None  # (stage index, error factor)
        self.setup_mean_s = 6.0
        self.work_s = 0.0
        self.done_s = 0.0
        self.task_id = ""

    async def start_subrun(self, task: TaskAssignment, scratch: Scratch | None) -> None:
        self.task_id = task.task_id
        self.work_s = task.work_s
        self.done_s = 0.0
        self._estimate = None

    @property
    def settings(self) -> dict[str, Any]:
        """The solver's resolved settings, recorded per worker in `run_started`."""
        return {"estimate_log_sd": self.estimate_log_sd}

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

    def _stage_index(self) -> int:
        acc = 0.0
        for i, (_, share) in enumerate(STAGES):
            acc += share * self.work_s
            if self.done_s < acc - 1e-9:
                return i
        return len(STAGES) - 1

    def estimate_factor(self) -> float:
        """The current stage's estimation error, drawn once when the solver first plans in it
        (1 when the request is exact)."""
        if self._estimate_rng is None:
            return 1.0
        stage = self._stage_index()
        if self._estimate is None or self._estimate[0] != stage:
            bound = math.log(ESTIMATE_MAX_FACTOR)
            draw = self._estimate_rng.normal(0.0, self.estimate_log_sd)
            self._estimate = (stage, math.exp(float(np.clip(draw, -bound, bound))))
        return self._estimate[1]

    async def next_action(self, view: SolverView) -> Request | Withdraw | None:
        """Ask for a window covering the current stage (observe, implement, compile, verify):
        the exact stage need, or with `estimate_log_sd` > 0 the solver's estimate of it (the
        true stage need times the stage's estimation error)."""
        if self.done_s >= self.work_s > 0:  # done
            return None
        want = math.ceil(self.stage_need_s() * self.estimate_factor())  # factor 1 when exact
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
