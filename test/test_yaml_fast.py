"""``io.yaml_file`` parses with libyaml first: every YAML file the project ships must come out the same as
from the pure-Python loader, a file libyaml does not read must get the pure loader's message, and the
project's files must be read by libyaml alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynik_ros.io import yaml_file
from dynik_ros.io.yaml_file import YamlFileError, parse_yaml

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted(p for d in ("config", "test", "launch") for p in (ROOT / d).rglob("*.yaml"))


def _pure(text: str, source: str) -> object:
    loader = yaml_file._UniqueKeyLoader(text)
    loader.source = source
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


@pytest.mark.skipif(yaml_file._FastUniqueKeyLoader is None, reason="PyYAML without libyaml")
def test_shipped_files_read_by_libyaml_alone_as_the_pure_loader_reads_them(monkeypatch) -> None:
    assert len(FILES) > 10
    texts = {path: path.read_text(encoding="utf-8") for path in FILES}
    expected = {path: _pure(text, str(path)) for path, text in texts.items()}

    def refuse(*args: object) -> None:
        raise AssertionError("the pure-Python loader was used")

    monkeypatch.setattr(yaml_file, "_UniqueKeyLoader", refuse)
    for path, text in texts.items():
        got = parse_yaml(text, str(path))
        assert got == expected[path] and repr(got) == repr(expected[path]), path


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: [1, 2\n",  # not closed
        "a: 1\n  b: 2\n",  # bad indentation
        "a: b: c\n",
        "robot:\n  name: x\n  name: y\n",  # a repeated key
        "m: {x: 1, x: 2}\n",
        "- a\nb: 1\n",
        "a: 'é\n",
    ],
)
def test_errors_are_the_pure_loaders(text: str, monkeypatch) -> None:
    with pytest.raises(YamlFileError) as fast:
        parse_yaml(text, "f.yaml")
    monkeypatch.setattr(yaml_file, "_FastUniqueKeyLoader", None)
    with pytest.raises(YamlFileError) as pure:
        parse_yaml(text, "f.yaml")
    assert str(fast.value) == str(pure.value)
