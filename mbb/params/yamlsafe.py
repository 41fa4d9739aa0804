"""Reading a params YAML document safely: YAML 1.2 scalars, no duplicate keys, and limits on
size, depth and aliases checked while composing, before anything is constructed or validated.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import yaml

__all__ = [
    "MAX_ALIASES",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_PARAMS_BYTES",
    "LimitError",
    "safe_yaml",
    "yaml_problem",
]

MAX_PARAMS_BYTES = 1 << 20  # a params file (or one --set value) larger than this is refused
MAX_DEPTH = 32  # nesting of mappings and lists, aliases expanded
MAX_ALIASES = 100  # `*name` references in one document
MAX_NODES = 20_000  # scalars, mappings and lists, aliases expanded (an alias bomb expands to 10^9)

_BOOL_TAG = "tag:yaml.org,2002:bool"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_MERGE_TAG = "tag:yaml.org,2002:merge"


class LimitError(yaml.YAMLError):
    """The document breaks a size, depth or alias limit (message: one line, no input echoed)."""


class _ParamsLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 scalars and limits checked while composing, before anything is
    constructed or validated:

    - only true/false are booleans: `off`, `on`, `yes`, `no` stay strings, so documented values
      such as `llm.cache: off` load as written (boolean fields accept them, see `Flag`);
    - `1e3` is a float (YAML 1.1 wants `1.0e3` and reads `1e3` as a string);
    - a key given twice in one mapping is an error (PyYAML keeps the last one silently);
    - at most MAX_ALIASES aliases, MAX_DEPTH levels and MAX_NODES nodes with aliases expanded.
    """

    # types-PyYAML declares this an instance variable; PyYAML itself keeps it on the class
    yaml_implicit_resolvers: ClassVar[dict[str, list[tuple[str, re.Pattern[str]]]]] = {  # type: ignore[misc]
        first: [(tag, rx) for tag, rx in resolvers if tag != _BOOL_TAG]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise LimitError(f"more than {MAX_ALIASES} aliases (refused: an alias bomb?)")
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise LimitError(f"nested deeper than {MAX_DEPTH} levels (refused)")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Any:
        node = super().compose_document()
        _check_expanded(node)
        return node

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node)
                if key in seen:
                    mark = key_node.start_mark
                    raise LimitError(
                        f"duplicate key {str(key)[:60]!r} at line {mark.line + 1}, column "
                        f"{mark.column + 1} (each key may appear once per mapping)"
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


_ParamsLoader.add_implicit_resolver(
    _BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_ParamsLoader.add_implicit_resolver(
    _FLOAT_TAG, re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def _check_expanded(root: Any) -> None:
    """Size and depth of the document with every alias expanded, computed on the node graph
    (an alias is the node it names, so nothing is expanded); a recursive alias is refused."""
    if root is None:
        return
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    open_: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if isinstance(node, yaml.ScalarNode):
            size[key], depth[key] = 1, 1
            continue
        kids = (
            [x for pair in node.value for x in pair]
            if isinstance(node, yaml.MappingNode)
            else list(node.value)
        )
        if children_done:
            open_.discard(key)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            if size[key] > MAX_NODES:
                raise LimitError(
                    f"more than {MAX_NODES} values with aliases expanded (refused: an alias bomb?)"
                )
            if depth[key] > MAX_DEPTH:
                raise LimitError(f"nested deeper than {MAX_DEPTH} levels (refused)")
            continue
        if key in size:
            continue
        if key in open_:
            raise LimitError("a recursive alias (refused)")
        open_.add(key)
        stack.append((node, True))
        for k in kids:
            if id(k) in open_:
                raise LimitError("a recursive alias (refused)")
            if id(k) not in size:
                stack.append((k, False))


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error as one line: what, where (never the document's text)."""
    if isinstance(exc, LimitError):
        return str(exc)
    if isinstance(exc, yaml.MarkedYAMLError):
        where = []
        if exc.problem_mark is not None:
            m = exc.problem_mark
            where.append(f"line {m.line + 1}, column {m.column + 1}")
        if exc.context and exc.context_mark is not None:
            where.append(f"{exc.context} at line {exc.context_mark.line + 1}")
        return f"{exc.problem or 'invalid'} ({'; '.join(where)})" if where else str(exc.problem)
    return " ".join(str(exc).split())[:200]


def safe_yaml(text: str) -> Any:
    """Parse one YAML document with `_ParamsLoader` (limits, duplicate keys, YAML 1.2 scalars).
    Raises `yaml.YAMLError`; `yaml_problem` turns it into one line."""
    if len(text) > MAX_PARAMS_BYTES:
        raise LimitError(f"larger than {MAX_PARAMS_BYTES} bytes (refused)")
    loader = _ParamsLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
