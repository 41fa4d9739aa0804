"""A condition's parameters: the schema (`schema`), the safe YAML reader (`yamlsafe`) and the
reader of params files with their `extends:` chains and overrides (`read`).

The schema names registered things (rules, personas, backends) as strings; they are checked
against their registries when a run is built (`mbb.batch.build`), so this package imports
nothing above the core and the LLM configs.
"""

from mbb.params.read import (
    ParamsError,
    deep_merge,
    format_problems,
    parse_set_option,
    read_params,
)
from mbb.params.schema import (
    DEFAULT_ROSTER,
    BehaviourKnobs,
    BudgetParams,
    Condition,
    DeadlineParams,
    LlmParams,
    MechanismParams,
    MemoryParams,
    NegotiationParams,
    PopulationChange,
    SolverLoopParams,
    TaskParams,
    TimeParams,
    WindowParams,
    WorkerOverride,
    WorkersParams,
    WorkerSpec,
)
from mbb.params.yamlsafe import safe_yaml

__all__ = [
    "DEFAULT_ROSTER",
    "BehaviourKnobs",
    "BudgetParams",
    "Condition",
    "DeadlineParams",
    "LlmParams",
    "MechanismParams",
    "MemoryParams",
    "NegotiationParams",
    "ParamsError",
    "PopulationChange",
    "SolverLoopParams",
    "TaskParams",
    "TimeParams",
    "WindowParams",
    "WorkerOverride",
    "WorkerSpec",
    "WorkersParams",
    "deep_merge",
    "format_problems",
    "parse_set_option",
    "read_params",
    "safe_yaml",
]
