"""The one YAML loader of every file the project reads (robot maps, calibrations, pipelines, skeleton maps).

``yaml.safe_load`` resolves a key written twice in one mapping to its last value without a word: a map with
``contact:`` twice silently loses the first block. :func:`load_yaml` refuses it, naming the file, the key
and both lines; any YAML error comes back as one :class:`YamlFileError` line starting with the file name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlFileError(ValueError):
    """A YAML file or text that cannot be read, is not YAML, or repeats a key (one line, names it)."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """``SafeLoader`` whose mappings refuse a repeated key (``<<`` merges may still be overridden)."""

    source = "<text>"

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict:
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, yaml.Node] = {}
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    earlier = first.setdefault(key, key_node)
                except TypeError:  # unhashable key: SafeLoader's own error says so
                    continue
                if earlier is not key_node:
                    raise YamlFileError(
                        f"{self.source}: key '{key}' is written twice in one mapping ({_where(earlier)} and "
                        f"{_where(key_node)}); YAML would keep only the last one, remove or merge one of them"
                    )
        return super().construct_mapping(node, deep=deep)


def _where(node: yaml.Node) -> str:
    """``line L, column C`` (1-based) of a node (a flow mapping may put both keys on one line)."""
    return f"line {node.start_mark.line + 1}, column {node.start_mark.column + 1}"


def parse_yaml(text: str, source: str) -> Any:
    """``text`` parsed as safe YAML with unique keys; errors are :class:`YamlFileError` naming ``source``."""
    loader = _UniqueKeyLoader(text)
    loader.source = source
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise YamlFileError(f"{source}: not valid YAML: {where}{problem}") from None
    finally:
        loader.dispose()


def load_yaml(path: str | Path) -> Any:
    """The YAML file ``path`` (see :func:`parse_yaml`); an unreadable file is a :class:`YamlFileError` too."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else exc
        raise YamlFileError(f"{path}: cannot read: {reason}") from None
    return parse_yaml(text, str(path))
