"""The modeled task catalogue: the work W each modeled task needs (the offline population's
tasks). The modeled solver (`mbb.agents.modeled`) turns window time into progress on them; the
workload (`mbb.tasks.workload`) assigns them to seats; the run builder checks `tasks.suite`
against them. Named after the real programs of the task suite; W grows with the interface.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MODELED_TASKS", "ModeledTask"]


@dataclass(frozen=True, slots=True)
class ModeledTask:
    task_id: str
    work_s: float  # execution seconds a typical worker needs


MODELED_TASKS: tuple[ModeledTask, ...] = (
    ModeledTask("rev", 160),
    ModeledTask("tac", 180),
    ModeledTask("head", 200),
    ModeledTask("wc", 220),
    ModeledTask("expand", 240),
    ModeledTask("fold", 260),
    ModeledTask("nl", 280),
    ModeledTask("uniq", 300),
    ModeledTask("cut", 330),
    ModeledTask("tr", 360),
    ModeledTask("column", 450),
    ModeledTask("bc", 560),
)
