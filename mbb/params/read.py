"""Reading a params file: YAML (safely, `mbb.params.yamlsafe`), `extends:` chains, overrides
deep-merged on top, then the schema (`mbb.params.schema`); every problem is one line naming the
file, the field and what is allowed.

Precedence (highest first): explicit overrides (papermill, CLI `--set`) > the YAML file > the
defaults of the schema. Overrides are deep-merged into the file, so overriding `budget.credits`
keeps `budget.reset_each_subrun`; a misspelt key anywhere is an error, never silently ignored.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from mbb.core.paths import is_bare_name, is_file_name, params_file
from mbb.params.schema import Condition
from mbb.params.yamlsafe import MAX_DEPTH, MAX_PARAMS_BYTES, LimitError, safe_yaml, yaml_problem

__all__ = [
    "ParamsError",
    "deep_merge",
    "format_problems",
    "parse_set_option",
    "read_params",
]


class ParamsError(ValueError):
    """A params file or override is invalid; the message names file, field and what is allowed."""


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Merge `override` into a copy of `base`: mappings merge key by key, anything else replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def parse_set_option(option: str) -> dict[str, Any]:
    """`a.b.c=VALUE` (VALUE parsed as YAML) -> {'a': {'b': {'c': VALUE}}}."""
    if "=" not in option:
        raise ParamsError(f"--set expects KEY=VALUE with a dotted KEY, got {option!r}")
    key, raw = option.split("=", 1)
    parts = key.strip().split(".", MAX_DEPTH)
    if len(parts) > MAX_DEPTH:
        raise ParamsError(f"--set: key {_short(key)} has more than {MAX_DEPTH} parts (refused)")
    if not all(parts):
        raise ParamsError(f"--set: empty segment in key {_short(key)}")
    try:
        value: Any = safe_yaml(raw)
    except LimitError as exc:
        raise ParamsError(f"--set {key}: value {_short(raw)}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ParamsError(
            f"--set {key}: value {_short(raw)} is not valid YAML: {yaml_problem(exc)}"
        ) from None
    for part in reversed(parts):
        value = {part: value}
    return value


def _short(value: Any, limit: int = 60) -> str:
    """repr of a value given in input, cut: an error message never echoes a large input."""
    r = repr(value)
    return r if len(r) <= limit else f"{r[: limit - 5]}...{r[-1]}"


def _in(loc: tuple[Any, ...], given: Mapping[str, Any] | None) -> bool:
    """Whether the field at `loc` was given in `given` (an overrides mapping)."""
    node: Any = given
    for part in loc:
        if not isinstance(node, Mapping) or str(part) not in node:
            return False
        node = node[str(part)]
    return bool(loc)


def format_problems(source: str, problems: list[str]) -> str:
    """One line: `source: invalid condition: field: problem; field: ...`."""
    n = len(problems)
    head = f"{source}: invalid condition" + (f" ({n} problems)" if n > 1 else "")
    return f"{head}: {'; '.join(problems)}"


def _format_validation_error(
    source: str, exc: ValidationError, overrides: Mapping[str, Any] | None = None
) -> str:
    """One line: `source: invalid condition: field: problem (got value); field: ...`; a field
    that came from `overrides` (`--set`, papermill) is marked `(override)`, so the error does
    not blame the file for a value the file never had."""
    problems = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if _in(err["loc"], overrides):
            loc += " (override)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            parent = _model_at(err["loc"][:-1])
            allowed = ", ".join(sorted(parent.model_fields)) if parent else "see params/base.yaml"
            close = (
                difflib.get_close_matches(str(err["loc"][-1]), list(parent.model_fields), n=1)
                if parent
                else []
            )
            msg = (
                f"unknown field; did you mean `{close[0]}`? (allowed here: {allowed})"
                if close
                else f"unknown field; allowed here: {allowed}"
            )
        elif err["type"] == "literal_error":
            msg = f"{msg} (got {_short(err.get('input'))})"
        elif "input" in err and not isinstance(err["input"], dict | list):
            msg = f"{msg} (got {_short(err['input'])})"
        msg = msg.removeprefix("Value error, ")
        problems.append(f"{loc}: {' '.join(msg.split())}")
    return format_problems(source, problems)


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model owning a location, so an unknown-field error can list what is allowed."""
    model: type[BaseModel] = Condition
    parts = list(loc)
    while parts:
        field = model.model_fields.get(str(parts.pop(0)))
        if field is None:
            return None
        ann = field.annotation
        if get_origin(ann) is dict:  # dict[str, Model]: the next part is a key
            ann = get_args(ann)[1]
            if not parts:
                return None
            parts.pop(0)
        nested = [
            a for a in (ann, *get_args(ann)) if isinstance(a, type) and issubclass(a, BaseModel)
        ]
        if not nested:
            return None
        model = nested[0]
    return model


def _read_yaml_with_extends(path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    """Read a params file; `extends: other.yaml` (relative to it) is read first and merged under."""
    label = str(path)
    if not path.is_file():
        raise ParamsError(f"{label}: no such params file")
    if path.resolve() in chain:
        raise ParamsError(f"{label}: 'extends' cycle: {' -> '.join(map(str, (*chain, path)))}")
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_PARAMS_BYTES + 1)
    except OSError as exc:
        raise ParamsError(f"{label}: cannot read: {exc.strerror}") from None
    if len(raw) > MAX_PARAMS_BYTES:
        raise ParamsError(f"{label}: larger than {MAX_PARAMS_BYTES} bytes (refused)")
    try:
        data = safe_yaml(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ParamsError(f"{label}: not UTF-8 text (byte {exc.start})") from None
    except LimitError as exc:
        raise ParamsError(f"{label}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ParamsError(f"{label}: not valid YAML: {yaml_problem(exc)}") from None
    except RecursionError:
        raise ParamsError(f"{label}: nested too deeply (refused)") from None
    if data is None or data == {}:
        raise ParamsError(
            f"{label}: empty params file; give at least `name:` (or `extends: base.yaml`)"
        )
    if not isinstance(data, dict):
        raise ParamsError(
            f"{label}: the top level must be a mapping of fields, got {type(data).__name__}"
        )
    if "conditions" in data and "workers" not in data and "extends" not in data:
        raise ParamsError(  # the likelier mistake than seven unknown fields, said first
            f"{label}: a study file (it has `conditions:`), not a condition's params: run it "
            "with `mbb study FILE` (`--estimate` for its calls and cost)"
        )
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise ParamsError(f"{label}: extends: must be a file name, got {parent!r}")
    try:  # `base` is mbb's; `base.yaml` is the file beside this one if any, else mbb's (paths.py)
        parent_path = (
            params_file(parent, near=path.parent)
            if is_bare_name(parent) or is_file_name(parent, ".yaml")
            else path.parent / parent
        )
    except FileNotFoundError as exc:
        raise ParamsError(f"{label}: extends: {exc}") from None
    if not parent_path.is_file():  # name the file that holds the bad `extends`, not only the target
        raise ParamsError(f"{label}: extends: no such params file {str(parent_path)!r}")
    base = _read_yaml_with_extends(parent_path, (*chain, path.resolve()))
    return deep_merge(base, data)


def read_params(
    source: str | Path | Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
) -> Condition:
    """Read a condition from a YAML path (or a mapping), deep-merging `overrides` on top, and
    validate it against the schema. Registered names (rules, personas, backends) are checked
    by the run builder: `mbb.load_params` (`mbb.batch.build.load_params`) reads and checks.

    `source`: a path relative to the current directory, a bare name of one of mbb's conditions
    (`base`, see `mbb.core.paths`), or the params as a mapping; `overrides`: nested fields merged on
    top."""
    if isinstance(source, Mapping):
        label, data = "<params>", dict(source)
    else:
        try:
            path = params_file(source)
        except FileNotFoundError as exc:
            raise ParamsError(str(exc)) from None
        label, data = str(source), _read_yaml_with_extends(path, ())
    if overrides:
        if not isinstance(overrides, Mapping):
            raise ParamsError(
                f"{label}: overrides must be a mapping, got {type(overrides).__name__}"
            )
        data = deep_merge(data, overrides)
    try:
        return Condition.model_validate(data)
    except ValidationError as exc:
        raise ParamsError(_format_validation_error(label, exc, overrides)) from None
