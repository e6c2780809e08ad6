"""Pipeline files: ``config/pipelines/<name>.yaml`` (or any path) listing a pipeline's lifecycle nodes with
their parameters and the topics to record, the ``--param node.name:=value`` overrides, and the typed rclpy
parameters each node is created with. Shared by the one-process runner (:mod:`dynik_ros.cli.run`) and the
multi-process one (:mod:`dynik_ros.cli.run_processes`)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dynik_ros.io.yaml_file import YamlFileError, load_yaml, parse_yaml
from dynik_ros.models.assets import share_path

NODE_CLASSES = {
    "wearable_node": "dynik_ros.nodes.wearable_node:WearableNode",
    "ik_node": "dynik_ros.nodes.ik_node:IKNode",
    "mocap_node": "dynik_ros.nodes.mocap_node:MocapNode",
    "bridge_node": "dynik_ros.nodes.bridge_node:BridgeNode",
    "sim_node": "dynik_ros.nodes.sim_node:SimNode",
    "dynamics_node": "dynik_ros.nodes.dynamics_node:DynamicsNode",
}
# Parameters holding file paths: relative values are looked up in the working directory, then in the
# package's share directory (``config/g1.yaml``).
PATH_PARAMETERS = ("config_file", "urdf", "bag_path")
COMMANDS_TOKEN = "@commands"


class PipelineError(RuntimeError):
    """A pipeline that cannot be loaded or run; the message says which node or parameter."""


@dataclass
class NodeEntry:
    executable: str
    name: str
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass
class Pipeline:
    name: str
    path: Path
    description: str
    offline: bool
    nodes: list[NodeEntry]
    record: list[str]

    def node(self, name: str) -> NodeEntry | None:
        return next((n for n in self.nodes if n.name == name), None)


def node_class(executable: str) -> type:
    try:
        module, cls = NODE_CLASSES[executable].split(":")
    except KeyError:
        raise PipelineError(
            f"unknown node executable '{executable}', expected one of {list(NODE_CLASSES)}"
        ) from None
    return getattr(importlib.import_module(module), cls)


def pipelines_dir() -> Path:
    return share_path("config", "pipelines")


def available_pipelines() -> list[str]:
    directory = pipelines_dir()
    return sorted(p.stem for p in directory.glob("*.yaml")) if directory.is_dir() else []


def load_pipeline(name_or_path: str | Path) -> Pipeline:
    """A pipeline by name (``config/pipelines/<name>.yaml``) or YAML path."""
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml") and path.is_file()):
        path = pipelines_dir() / f"{name_or_path}.yaml"
    if not path.is_file():
        raise PipelineError(
            f"unknown pipeline '{name_or_path}'; available: {', '.join(available_pipelines())}"
        )
    try:
        data = load_yaml(path) or {}
    except YamlFileError as exc:
        raise PipelineError(str(exc)) from None
    if not isinstance(data, Mapping):
        raise PipelineError(f"{path}: a pipeline file is a mapping (description, nodes, record)")
    entries = []
    for i, item in enumerate(data.get("nodes") or []):
        if not isinstance(item, Mapping) or "executable" not in item:
            raise PipelineError(f"{path}: nodes[{i}] needs an 'executable'")
        node_class(item["executable"])
        entries.append(
            NodeEntry(
                item["executable"], item.get("name", item["executable"]), dict(item.get("parameters") or {})
            )
        )
    if not any(e.executable == "wearable_node" for e in entries):
        raise PipelineError(f"{path}: a pipeline needs a wearable_node (its source ends the run)")
    return Pipeline(
        name=path.stem,
        path=path,
        description=str(data.get("description", "")),
        offline=bool(data.get("offline", True)),
        nodes=entries,
        record=[str(t) for t in data.get("record") or []],
    )


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``['rate:=240', 'ik_node.position_gain:=20']`` -> ``{'rate': 240, 'ik_node.position_gain': 20}``
    (values parsed as YAML, like ``ros2 launch`` arguments)."""
    out = {}
    for item in items:
        key, sep, value = item.partition(":=")
        if not sep or not key:
            raise PipelineError(f"--param expects name:=value or node.name:=value, got '{item}'")
        try:
            out[key.strip()] = parse_yaml(value, f"--param {item}") if value.strip() else ""
        except YamlFileError as exc:
            raise PipelineError(str(exc)) from None
    return out


def apply_overrides(pipeline: Pipeline, overrides: Mapping[str, Any]) -> None:
    """Set ``node.param`` (that node) or ``param`` (every node declaring it) values; unknown names fail.

    A node given another ``robot`` without a ``config_file`` drops the pipeline's ``config_file`` (the map of
    the pipeline's robot, which the nodes load first): ``g1_retargeting --param robot:=icub`` retargeted to
    the G1 without a word; it now loads the iCub's map (or the map ``robot`` names by path)."""
    given: dict[int, set[str]] = {}
    for key, value in overrides.items():
        node_name, _, param = key.rpartition(".")
        targets = [n for n in pipeline.nodes if n.name == node_name] if node_name else list(pipeline.nodes)
        if node_name and not targets:
            raise PipelineError(f"--param {key}: no node '{node_name}' in pipeline '{pipeline.name}'")
        hit = False
        for entry in targets:
            if param in {spec.name for spec in node_class(entry.executable).PARAMS}:
                entry.parameters[param] = value
                given.setdefault(id(entry), set()).add(param)
                hit = True
        if not hit:
            raise PipelineError(f"--param {key}: no node of pipeline '{pipeline.name}' declares '{param}'")
    for entry in pipeline.nodes:
        params = given.get(id(entry), set())
        if "robot" in params and "config_file" not in params and entry.parameters.get("config_file"):
            entry.parameters["config_file"] = ""


def _resolve_path(value: str) -> str:
    if not value or Path(value).is_absolute():
        return value
    if Path(value).exists():
        return str(Path(value).resolve())
    shared = share_path(*Path(value).parts)
    return str(shared) if shared.exists() else value


def typed_parameters(entry: NodeEntry) -> list:
    """The entry's parameters as rclpy ``Parameter`` overrides, typed like the node declares them."""
    from rclpy.parameter import Parameter

    specs = {spec.name: spec for spec in node_class(entry.executable).PARAMS}
    out = []
    for name, value in entry.parameters.items():
        spec = specs.get(name)
        if spec is None and name != "use_sim_time":
            raise PipelineError(f"node '{entry.name}' has no parameter '{name}'")
        if spec is not None:
            value = spec.coerce(value)
        if name in PATH_PARAMETERS and isinstance(value, str):
            value = _resolve_path(value)
        out.append(Parameter(name, value=value))
    return out
