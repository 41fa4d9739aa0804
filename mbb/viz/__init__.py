"""mbb's figures: altair charts from the event tables and the analyses' outputs.

One module per topic, all drawn with the shared look of `mbb.viz.theme`:

- `run`: one condition's runs — resource timeline, bids, budgets, outcomes per subrun;
- `compare`: conditions side by side — outcomes and bids by condition;
- `taxonomy`: behaviour prevalence, strategic profiles, institutions, drift, classifier checks;
- `transmission`: rule and commitment lifecycles per condition (nested stages; items that
  skipped a stage counted apart) and transmission across subruns;
- `starting_states`: urgent and rich workers, contested wins;
- `tokens`: the token audit and tokens per credit won;
- `mechanisms`: the agents' institutions against centralized mechanisms;
- `workload`: demand and used time against capacity per subrun;
- `render`: offline rendering (PNG/SVG) for notebooks and files;
- `transcript`: one round as an HTML transcript.

Every figure aggregates in polars first and returns an altair chart. The submodules are
imported on first use (PEP 562) and altair only with them, so `import mbb.viz` stays light.
Render offline with `mbb.viz.render.enable()` (notebooks) or `mbb.viz.render.save_chart` (files).
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = [
    "compare",
    "mechanisms",
    "render",
    "run",
    "starting_states",
    "taxonomy",
    "theme",
    "tokens",
    "transcript",
    "transmission",
    "workload",
]


def __getattr__(name: str) -> ModuleType:
    if name not in __all__:
        raise AttributeError(f"module 'mbb.viz' has no attribute {name!r}")
    module = importlib.import_module(f"mbb.viz.{name}")
    globals()[name] = module
    return module


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
