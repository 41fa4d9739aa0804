"""Where a run came from: git revision of the sources and versions of the packages that matter."""

from __future__ import annotations

import functools
import platform
import subprocess
from importlib import metadata
from typing import Any

__all__ = ["provenance"]

_PACKAGES = ("mbb", "pydantic", "numpy", "polars", "altair", "openai", "papermill")


@functools.cache
def _git_revision() -> str | None:
    from mbb.core.paths import PROJECT_ROOT as root

    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out + ("+dirty" if dirty else "")


@functools.cache
def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def provenance() -> dict[str, Any]:
    """Computed once per process (git and metadata look-ups are slow on a hot path)."""
    return {
        "git_revision": _git_revision(),
        "python": platform.python_version(),
        "packages": _versions(),
    }
