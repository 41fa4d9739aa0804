"""mbb — the SCARCE arena: coding agents negotiating for one shared execution resource.

The names a notebook needs; everything else lives in the submodules. They are imported on first
use (PEP 562), so `import mbb` and `mbb --help` stay fast: altair alone takes seconds to import,
and a process pool's workers would pay for whatever the package imports eagerly.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it, or the module itself (a "=" before its path)
_LAZY = {
    "CATEGORIES": "mbb.core.taxonomy",
    "BatchResult": "mbb.batch.runner",
    "Condition": "mbb.params",
    "ParamsError": "mbb.params",
    "load_params": "mbb.batch.build",
    "load_tables": "mbb.core.tables",
    "output_dir": "mbb.core.paths",
    "outputs_root": "mbb.core.paths",
    "params_file": "mbb.core.paths",
    "user_path": "mbb.core.paths",
    "viz": "=mbb.viz",
    "render": "=mbb.viz.render",
    "run_condition": "mbb.batch.build",
    "run_many": "mbb.batch.runner",
    "tables": "=mbb.core.tables",
    "table": "mbb.viz.table",
    "tables_from_run_dirs": "mbb.core.tables",
    "write_tables": "mbb.core.tables",
}
__all__ = [
    "CATEGORIES",
    "BatchResult",
    "Condition",
    "ParamsError",
    "load_params",
    "load_tables",
    "output_dir",
    "outputs_root",
    "params_file",
    "render",
    "run_condition",
    "run_many",
    "table",
    "tables",
    "tables_from_run_dirs",
    "user_path",
    "viz",
    "write_tables",
]
assert sorted(__all__) == sorted(_LAZY)

if TYPE_CHECKING:
    from mbb import viz
    from mbb.batch.build import load_params, run_condition
    from mbb.batch.runner import BatchResult, run_many
    from mbb.core import tables
    from mbb.core.paths import output_dir, outputs_root, params_file, user_path
    from mbb.core.tables import load_tables, tables_from_run_dirs, write_tables
    from mbb.core.taxonomy import CATEGORIES
    from mbb.params import Condition, ParamsError
    from mbb.viz import render
    from mbb.viz.table import table


def __getattr__(name: str) -> Any:
    try:
        module = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'mbb' has no attribute {name!r}") from None
    value = (
        importlib.import_module(module[1:])
        if module.startswith("=")
        else getattr(importlib.import_module(module), name)
    )
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
