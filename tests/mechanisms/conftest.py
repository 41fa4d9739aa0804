"""Small conditions for the mechanism tests."""

from __future__ import annotations

import pytest

from mbb.batch.build import load_params
from mbb.core.paths import PROJECT_ROOT
from mbb.params import Condition


def small(kind: str = "negotiated", **overrides) -> Condition:
    """Base population, 2 subruns (fast), under mechanism `kind`."""
    return load_params(
        PROJECT_ROOT / "params" / "base.yaml",
        {"subruns": 2, "mechanism": {"kind": kind}, **overrides},
    )


@pytest.fixture(scope="session")
def small_condition():
    return small
