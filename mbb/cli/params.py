"""`mbb params PARAMS`: validate a params file and print the resolved condition."""

from __future__ import annotations

import argparse
import json
from typing import Any

from mbb.cli import common

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from mbb.batch.build import load_params

    cond = load_params(args.params, common.overrides(args.set))
    print(json.dumps(cond.model_dump(mode="json"), indent=2))
    return 0


def add_parser(sub: Any) -> None:
    v = sub.add_parser("params", help="validate a params file and print the resolved condition")
    v.add_argument("params", help="params YAML file (the condition)")
    common.add_set(v)
    v.set_defaults(func=_run)
