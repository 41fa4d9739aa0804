"""The shared execution resource: window-gated commands in a bubblewrap sandbox."""

from mbb.resource.resource import CommandResult, ExecutionResource, ToolCosts, hidden_paths
from mbb.resource.sandbox import (
    Bind,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailable,
    run_sandboxed,
)

__all__ = [
    "Bind",
    "CommandResult",
    "ExecutionResource",
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailable",
    "ToolCosts",
    "hidden_paths",
    "run_sandboxed",
]
