"""The one YAML loader of every file the project reads (robot maps, calibrations, pipelines, skeleton maps).

``yaml.safe_load`` resolves a key written twice in one mapping to its last value without a word: a map with
``contact:`` twice silently loses the first block. :func:`load_yaml` refuses it, naming the file, the key
and both lines; any YAML error comes back as one :class:`YamlFileError` line starting with the file name.

Files are parsed by libyaml (PyYAML's ``CSafeLoader``) when PyYAML has it: 8x less CPU than the pure-Python
parser (a robot map 12 -> 1.5 ms; ``dynik-retarget`` reads seven files, ~0.02 s). A file it does not read
(not YAML, a repeated key) is read again by the pure-Python loader, whose error (its line, column and
wording) is the one raised: the same messages with or without libyaml.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlFileError(ValueError):
    """A YAML file or text that cannot be read, is not YAML, or repeats a key (one line, names it)."""


class _UniqueKeys:
    """A safe loader's mappings refusing a repeated key (``<<`` merges may still be overridden)."""

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
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc] - the loader's


class _UniqueKeyLoader(_UniqueKeys, yaml.SafeLoader):
    """The pure-Python ``SafeLoader`` refusing repeated keys: its errors are the ones raised."""


if hasattr(yaml, "CSafeLoader"):  # PyYAML built with libyaml

    class _FastUniqueKeyLoader(_UniqueKeys, yaml.CSafeLoader):
        """libyaml's ``CSafeLoader`` refusing repeated keys: :func:`parse_yaml`'s first try."""

else:
    _FastUniqueKeyLoader = None


def _where(node: yaml.Node) -> str:
    """``line L, column C`` (1-based) of a node (a flow mapping may put both keys on one line)."""
    return f"line {node.start_mark.line + 1}, column {node.start_mark.column + 1}"


def parse_yaml(text: str, source: str) -> Any:
    """``text`` parsed as safe YAML with unique keys; errors are :class:`YamlFileError` naming ``source``."""
    if _FastUniqueKeyLoader is not None:
        fast = _FastUniqueKeyLoader(text)
        try:
            return fast.get_single_data()
        except Exception:  # noqa: BLE001, S110 - read again below: the pure loader's error is the one raised
            pass
        finally:
            fast.dispose()
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
