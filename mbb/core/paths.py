"""Where paths resolve — one rule, stated here once.

- A relative path that a user gives (a CLI argument, a notebook parameter, a params field such as
  `llm.cache_file`) is relative to the current directory of the command, or of the kernel for a
  notebook run by hand. The CLI turns paths into absolute ones before a notebook sees them.
- A bare name — no folder, no suffix: `base`, `memory_off`, `run_condition` — names one of mbb's
  own params files (`params/<name>.yaml`), study files (`studies/<name>.yaml`) or notebooks
  (`notebooks/<name>.ipynb`). A path is never
  looked up in two places: `base` is mbb's condition, `./base.yaml` is yours.
- mbb's own files are found from `PROJECT_ROOT`, the only place the project's location is derived.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "NOTEBOOKS_DIR",
    "PARAMS_DIR",
    "PROJECT_ROOT",
    "STUDIES_DIR",
    "bundled_names",
    "is_bare_name",
    "notebook_file",
    "params_file",
    "study_file",
    "user_path",
]

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PARAMS_DIR = PROJECT_ROOT / "params"
NOTEBOOKS_DIR = PROJECT_ROOT / "notebooks"
STUDIES_DIR = PROJECT_ROOT / "studies"


def user_path(path: str | os.PathLike[str]) -> Path:
    """`path` made absolute against the current directory (`~` expanded).

    `path`: what the user gave."""
    return Path(path).expanduser().absolute()


def is_bare_name(spec: str | os.PathLike[str]) -> bool:
    """True for a name with no folder and no suffix (`base`): one of mbb's own files."""
    s = os.fspath(spec)
    return bool(s) and "/" not in s and os.sep not in s and not Path(s).suffix and s[0] != "~"


def bundled_names(folder: Path, suffix: str) -> list[str]:
    """The bare names mbb ships in `folder` (files ending in `suffix`)."""
    return sorted(p.stem for p in folder.glob(f"*{suffix}"))


def _resolve(spec: str | os.PathLike[str], folder: Path, suffix: str, what: str) -> Path:
    if not is_bare_name(spec):
        return user_path(spec)
    path = folder / f"{os.fspath(spec)}{suffix}"
    if not path.is_file():
        known = ", ".join(bundled_names(folder, suffix))
        raise FileNotFoundError(
            f"no {what} named {os.fspath(spec)!r} in mbb's {folder.name}/ (known: {known}); "
            f"a file of your own is a path ending in {suffix}"
        )
    return path


def params_file(spec: str | os.PathLike[str]) -> Path:
    """A params file: a bare condition name (`base`) is mbb's `params/<name>.yaml`; anything else
    is a path relative to the current directory."""
    return _resolve(spec, PARAMS_DIR, ".yaml", "condition")


def notebook_file(spec: str | os.PathLike[str]) -> Path:
    """A notebook: a bare name (`run_condition`) is mbb's `notebooks/<name>.ipynb`; anything else
    is a path relative to the current directory."""
    return _resolve(spec, NOTEBOOKS_DIR, ".ipynb", "notebook")


def study_file(spec: str | os.PathLike[str]) -> Path:
    """A study file: a bare name (`scarce`) is mbb's `studies/<name>.yaml`; anything else is a
    path relative to the current directory."""
    return _resolve(spec, STUDIES_DIR, ".yaml", "study")
