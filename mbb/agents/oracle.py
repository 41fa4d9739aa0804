"""The oracle solver: replays a known-good reconstruction through the real tools, no LLM.

It lets a whole condition run on real tasks offline. Inside its windows it does what a careful
agent would: observe the reference (`--help`, a sample run), write its files with `write`, run
`bash compile.sh`, self-test against the observed sample, then release. Every step is a command
on the shared resource, so it only happens inside a window; a step cut off at the window's hard
end is redone in the next window. The reconstructions live in `mbb/tasks/oracle/<task>/`
(never in an agent's view until the oracle writes them into its own workspace).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from mbb.core.actions import Request, Withdraw
from mbb.core.agent_api import (
    SolverView,
    TaskAssignment,
    WindowGrant,
    WindowOutcome,
)
from mbb.core.scratch import Scratch
from mbb.resource.resource import ExecutionResource
from mbb.tasks.evaluator import Evaluation
from mbb.tasks.harness import Measured, SolverTools, ToolResult, WorkspaceEvaluation
from mbb.tasks.suite import Suite

__all__ = ["DEFAULT_ORACLE_DIR", "OracleSolver", "make_oracle_solver"]

DEFAULT_ORACLE_DIR = Path(__file__).resolve().parent.parent / "tasks" / "oracle"


@dataclass(frozen=True, slots=True)
class _Step:
    name: str
    tool: str  # for the modeled cost estimate
    run: Callable[[], ToolResult]


class OracleSolver(WorkspaceEvaluation):
    """Satisfies `mbb.core.agent_api.Solver` on real tasks using the oracle reconstructions."""

    concurrent = False

    def __init__(
        self,
        worker: str,
        *,
        suite: Suite,
        resource: ExecutionResource,
        emit: Callable[..., Any] | None,
        time_model: str = "virtual",
        rng: random.Random | None = None,
        oracle_dir: Path = DEFAULT_ORACLE_DIR,
    ) -> None:
        tm = {"modeled": "virtual"}.get(time_model, time_model)
        if tm != resource.time_model:
            raise ValueError(
                f"time_model {time_model!r} does not match the resource's {resource.time_model!r}"
            )
        self.worker = worker
        self.suite = suite
        self.resource = resource
        self.emit = emit
        self.time_model = tm
        self.rng = rng or random.Random(0)
        self.oracle_dir = Path(oracle_dir)
        self.tools: SolverTools | None = None
        self.task_id: str | None = None
        self.steps: list[_Step] = []
        self.observed: dict[str, str] = {}
        self.last_evaluation: Evaluation | None = None
        self.measured: Measured | None = None
        self.progress_share = 0.0
        self.windows = 0

    # --- Solver protocol ----------------------------------------------------------------------
    async def start_subrun(self, task: TaskAssignment, scratch: Scratch | None) -> None:
        built = self.suite[task.task_id]
        src = self.oracle_dir / task.task_id
        if not (src / "compile.sh").is_file():
            raise FileNotFoundError(f"no oracle reconstruction for task {task.task_id!r} in {src}")
        self.task_id = task.task_id
        self.resource.assign(self.worker, built)
        self.tools = SolverTools(
            self.worker, self.resource, scratch=scratch, emit=self.emit, subrun=task.subrun
        )
        self.observed = {}
        self.last_evaluation, self.measured, self.progress_share = None, None, 0.0
        self.steps = self._plan(src, built.samples)

    def need_s(self) -> float:
        return sum(self.resource.costs.of(s.tool) for s in self.steps)

    async def next_action(self, view: SolverView) -> Request | Withdraw | None:
        if self.done:
            return None
        want = math.ceil(self.need_s())
        return Request(duration=min(view.window_max_s, max(view.window_min_s, want)))

    async def run_window(self, grant: WindowGrant) -> WindowOutcome:
        assert self.tools is not None, "start_subrun first"
        self.resource.open_window(grant)
        self.windows += 1
        self.tools.released = False
        while self.steps and self.resource.remaining_s(self.worker) > 0:
            result = self.steps[0].run()
            if result.killed or result.refused:
                break  # cut off at the hard end: redo this step in the next window
            self.steps.pop(0)
        completed = not self.steps
        if completed and self.tools.scratch is not None:
            self.tools.memory(f"{self.task_id}: oracle reconstruction written and compiled")
        used = self.tools.release()
        await self.measure_progress()
        early = used < grant.hard_end_s - grant.start_s
        return WindowOutcome(used_s=used, completed=completed, released=early and not completed)

    @property
    def done(self) -> bool:
        return self.task_id is not None and not self.steps

    @property
    def progress(self) -> float:
        """The share of hidden tests the workspace passed after the last window in which a
        command ran (`WorkspaceEvaluation.measure_progress`), as for every real-task solver."""
        return self.progress_share

    # --- the plan -----------------------------------------------------------------------------
    def _plan(self, src: Path, samples: tuple[str, ...]) -> list[_Step]:
        t = self.tools
        assert t is not None
        steps = [
            _Step("observe:help", "observe", lambda: self._observe("help", "./reference --help"))
        ]
        for i, s in enumerate(samples[:2]):
            steps.append(_Step(f"observe:{i}", "observe", partial(self._observe, str(i), s)))
        files = sorted(p for p in src.iterdir() if p.is_file())
        files.sort(key=lambda p: p.name == "compile.sh")  # the build script last
        for p in files:
            text = p.read_text()
            steps.append(_Step(f"write:{p.name}", "write", partial(t.write, p.name, text)))
        steps.append(_Step("compile", "compile", lambda: t.bash("bash compile.sh", tool="compile")))
        for i, s in enumerate(samples[:1]):
            steps.append(_Step(f"selftest:{i}", "bash", partial(self._selftest, str(i), s)))
        return steps

    def _observe(self, key: str, command: str) -> ToolResult:
        assert self.tools is not None
        r = self.tools.bash(command, tool="observe")
        if not r.killed and not r.refused:
            self.observed[key] = r.output
        return r

    def _selftest(self, key: str, command: str) -> ToolResult:
        assert self.tools is not None
        r = self.tools.bash(command.replace("./reference", "./executable"))
        if (
            not r.killed
            and not r.refused
            and key in self.observed
            and r.output != self.observed[key]
        ):
            self.tools.memory(f"{self.task_id}: self-test {key} differs from the reference")
        return r


def make_oracle_solver(
    worker: str,
    *,
    suite: Suite,
    resource: ExecutionResource,
    emit: Callable[..., Any] | None,
    time_model: str,
    rng: random.Random | None,
) -> OracleSolver:
    """Factory the arena calls for `workers.solver: oracle` on `tasks.kind: real`."""
    return OracleSolver(
        worker, suite=suite, resource=resource, emit=emit, time_model=time_model, rng=rng
    )
