"""mbb — the SCARCE arena: coding agents negotiating for one shared execution resource.

The names a notebook needs; everything else lives in the submodules.
"""

from mbb import figures, render, tables
from mbb.arena import run_condition
from mbb.notebooks import project_path
from mbb.params import Condition, ParamsError, load_params
from mbb.runner import BatchResult, run_many
from mbb.tables import load_tables, tables_from_run_dirs, write_tables
from mbb.taxonomy import CATEGORIES

__version__ = "0.1.0"

__all__ = [
    "CATEGORIES",
    "BatchResult",
    "Condition",
    "ParamsError",
    "figures",
    "load_params",
    "load_tables",
    "project_path",
    "render",
    "run_condition",
    "run_many",
    "tables",
    "tables_from_run_dirs",
    "write_tables",
]
