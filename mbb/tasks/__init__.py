"""Real tasks (ProgramBench-style): Debian CLI tools, hidden tests, evaluation, solver tools.

Build with `build_suite()` (cached), evaluate with `evaluate_submission()`; a solver works
through `SolverTools` on an `mbb.resource.ExecutionResource`.
"""

from mbb.tasks.suite import (
    REQUIRED_DEBIAN_PACKAGES,
    BuiltTask,
    HiddenTest,
    Suite,
    SuiteBuildError,
    build_suite,
)

__all__ = [
    "REQUIRED_DEBIAN_PACKAGES",
    "BuiltTask",
    "HiddenTest",
    "Suite",
    "SuiteBuildError",
    "build_suite",
]
