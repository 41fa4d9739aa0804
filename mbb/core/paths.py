"""Where paths resolve — one rule, stated here once.

- A relative path that a user gives (a CLI argument, a notebook parameter, a params field such as
  `llm.cache_file`) is relative to the current directory of the command, or of the kernel for a
  notebook run by hand. The CLI turns paths into absolute ones before a notebook sees them.
- A name with no folder names one of mbb's own params files (`params/<name>.yaml`), study files
  (`studies/<name>.yaml`) or notebooks (`notebooks/<name>.ipynb`), by one rule for every
  spelling:
  - a bare name (`base`, `scarce`, `run_condition`) is always mbb's;
  - a file name (`base.yaml`, `run_condition.ipynb`) is the file of that name where it is looked
    up from (the current directory; for `extends:`, the folder of the params file that says it)
    when there is one, else mbb's file of that name. A file next to you wins.
  Anything with a folder in it (`./base.yaml`, `params/x.yaml`, `/abs/x.yaml`) is only ever yours.
- mbb's own files are found from `PROJECT_ROOT`, the only place the project's location is derived.
- Outputs that nobody named go under `outputs/` of the current directory, except from inside
  mbb's own `notebooks/` folder (a JupyterLab kernel's directory): there they go under the
  project's `outputs/` (git-ignored), since mbb never writes inside `notebooks/`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from mbb.core.errors import no_surrogates

__all__ = [
    "NOTEBOOKS_DIR",
    "OUTPUTS_DIR",
    "PACKAGE_DIR",
    "PARAMS_DIR",
    "PROJECT_ROOT",
    "STUDIES_DIR",
    "bundled_names",
    "is_bare_name",
    "is_file_name",
    "notebook_file",
    "output_dir",
    "outputs_root",
    "params_file",
    "replace_file",
    "study_file",
    "user_path",
]

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # mbb/: its own files
PROJECT_ROOT = PACKAGE_DIR.parent
PARAMS_DIR = PROJECT_ROOT / "params"
NOTEBOOKS_DIR = PROJECT_ROOT / "notebooks"
STUDIES_DIR = PROJECT_ROOT / "studies"
OUTPUTS_DIR = PROJECT_ROOT / "outputs"


def user_path(path: str | os.PathLike[str]) -> Path:
    """`path` made absolute against the current directory (`~` expanded), its `..` and links
    resolved as the kernel would: one folder spelled two ways is one folder, and `x/../out`
    is `out` even while `x` does not exist (left as given, the first write made a stray `x`
    and, once `x` was gone, a study found none of its finished runs and made them again).

    `path`: what the user gave."""
    return Path(path).expanduser().resolve()


def is_bare_name(spec: str | os.PathLike[str]) -> bool:
    """True for a name with no folder and no suffix (`base`): one of mbb's own files."""
    s = os.fspath(spec)
    return bool(s) and "/" not in s and os.sep not in s and not Path(s).suffix and s[0] != "~"


def is_file_name(spec: str | os.PathLike[str], suffix: str) -> bool:
    """True for a file name with no folder ending in `suffix` (`base.yaml`).

    spec: what the user gave; suffix: the kind of file (`.yaml`, `.ipynb`)."""
    s = os.fspath(spec)
    return bool(s) and "/" not in s and os.sep not in s and s.endswith(suffix) and s[0] != "~"


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def outputs_root() -> Path:
    """Where outputs go when nobody named a folder: `outputs/` of the current directory, or the
    project's `outputs/` when the current directory is inside mbb's `notebooks/` (a JupyterLab
    kernel's), which mbb never writes into."""
    cwd = Path.cwd()
    return OUTPUTS_DIR if _inside(cwd, NOTEBOOKS_DIR) else cwd / "outputs"


def output_dir(spec: str | os.PathLike[str] | None, default: str) -> Path:
    """An output folder: `spec` as the user gave it (relative: to the current directory), or
    `outputs_root() / default` when `spec` is None. A folder inside mbb's `notebooks/` is
    refused: notebooks stay as committed, whatever runs them.

    spec: the folder the user named, or None; default: the name under `outputs/` otherwise."""
    path = user_path(spec) if spec is not None else outputs_root() / default
    if _inside(path, NOTEBOOKS_DIR):
        raise ValueError(
            f"{os.fspath(spec) if spec is not None else default}: inside mbb's notebooks/ "
            f"folder ({path}); mbb writes no output there: name a folder elsewhere, e.g. "
            f"{OUTPUTS_DIR / Path(default).name}"
        )
    return path


def bundled_names(folder: Path, suffix: str) -> list[str]:
    """The bare names mbb ships in `folder` (files ending in `suffix`)."""
    return sorted(p.stem for p in folder.glob(f"*{suffix}"))


def _resolve(
    spec: str | os.PathLike[str], folder: Path, suffix: str, what: str, near: Path | None
) -> Path:
    if is_file_name(spec, suffix):
        mine = (near if near is not None else Path.cwd()) / os.fspath(spec)
        own = folder / os.fspath(spec)
        return mine.absolute() if mine.is_file() or not own.is_file() else own
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


def params_file(spec: str | os.PathLike[str], near: Path | None = None) -> Path:
    """A params file: a bare condition name (`base`) is mbb's `params/<name>.yaml`; a file name
    (`base.yaml`) is the one in `near` when there is one, else mbb's; anything else is a path
    relative to the current directory.

    spec: what the user gave; near: where a file name is looked for first (default: the
    current directory; `extends:` passes the folder of the params file)."""
    return _resolve(spec, PARAMS_DIR, ".yaml", "condition", near)


def notebook_file(spec: str | os.PathLike[str], near: Path | None = None) -> Path:
    """A notebook: a bare name (`run_condition`) is mbb's `notebooks/<name>.ipynb`; a file name
    (`run_condition.ipynb`) is the one in `near` when there is one, else mbb's; anything else is
    a path relative to the current directory.

    spec: what the user gave; near: where a file name is looked for first (default: the
    current directory)."""
    return _resolve(spec, NOTEBOOKS_DIR, ".ipynb", "notebook", near)


def study_file(spec: str | os.PathLike[str], near: Path | None = None) -> Path:
    """A study file: a bare name (`scarce`) is mbb's `studies/<name>.yaml`; a file name
    (`scarce.yaml`) is the one in `near` when there is one, else mbb's; anything else is a path
    relative to the current directory.

    spec: what the user gave; near: where a file name is looked for first (default: the
    current directory)."""
    return _resolve(spec, STUDIES_DIR, ".yaml", "study", near)


def replace_file(path: Path, text: str | bytes) -> None:
    """Write `path` whole, atomically, and never through a link: a fresh file (O_EXCL, so not
    one planted in a shared folder) renamed over it — a symbolic link there is replaced, its
    target untouched. `text`: str (written as UTF-8, lone surrogates as U+FFFD) or bytes."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            # lone surrogates written as U+FFFD: a text from an endpoint holding one crashed the
            # report and the viewer, on every later attempt (F3 of red team rt37)
            fh.write(no_surrogates(text).encode("utf-8") if isinstance(text, str) else text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
