"""Checks of launch/ that need no ROS: `launch` and `launch_ros` are not installable from the registries,
so the launch files are read as source (ast) against setup.py, package.xml, the repository and the README.

* each ``*.launch.py`` parses, compiles and defines ``generate_launch_description()``;
* every executable named is installed: a dynik_ros console script (setup.py ``CONSOLE_SCRIPTS``, which
  the build puts in ``lib/dynik_ros/``), or a node of another package that package.xml depends on;
* every ``config/``, ``urdf/`` or ``launch/`` file named exists and is installed (setup.py ``SHARE_DIRS``);
* every launch argument has a description and a row in the launch-argument table of ``README.md``
  (or ``launch/README.md`` while README.md has no such table), and no row documents a non-argument;
* every lifecycle node is created next to the handlers that configure and activate it;
* ``config/dynik.rviz`` shows the robot model, TF and ``/dynik/markers`` in the ``world`` frame.

The recording and RViz helpers of the launch files are checked in test_launch_outputs.py.

Where `launch_ros` is importable (a ROS 2 install), the last tests also load every launch file with
the real API and build each pipeline without starting processes.
"""

from __future__ import annotations

import ast
import py_compile
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_DIR = ROOT / "launch"
PACKAGE = "dynik_ros"
LAUNCH_FILES = sorted(LAUNCH_DIR.glob("*.launch.py"))
PY_FILES = sorted(LAUNCH_DIR.glob("*.py"))
# Issue 4: human tracking with Human66 and Human48, retargeting to G1 and iCub, replay.
REQUIRED = {
    "human66_tracking.launch.py",
    "human48_tracking.launch.py",
    "g1_retargeting.launch.py",
    "icub_retargeting.launch.py",
    "replay.launch.py",
}
NODE_EXECUTABLES = {"wearable_node", "ik_node", "mocap_node", "bridge_node", "sim_node"}
SHARE_FILE = re.compile(r"^(launch|config|urdf)/[\w.\-/]+$")
SHARE_SUFFIXES = (".yaml", ".yml", ".urdf", ".xacro", ".rviz", ".launch.py")
TABLE_HEADING = re.compile(r"^#+\s.*launch arguments", re.IGNORECASE | re.MULTILINE)
TABLE_ROW = re.compile(r"^\|\s*`([A-Za-z_][\w]*)`\s*\|", re.MULTILINE)


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _setup_literal(name: str):
    """A module-level literal of setup.py (read with ast; setup.py is not run)."""
    for node in _tree(ROOT / "setup.py").body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise AssertionError(f"setup.py defines no {name}")


def _console_scripts() -> set[str]:
    return {entry.split("=", 1)[0].strip() for entry in _setup_literal("CONSOLE_SCRIPTS")}


def _exec_depends() -> set[str]:
    root = ET.parse(ROOT / "package.xml").getroot()
    return {(el.text or "").strip() for el in root if el.tag in ("depend", "exec_depend")}


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _scopes(tree: ast.Module) -> list[ast.AST]:
    """The module and every function in it (calls are attributed to the innermost one)."""
    return [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]


def _own_calls(scope: ast.AST) -> list[ast.Call]:
    """Calls in ``scope`` but not inside a nested function."""
    calls, stack = [], list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Call):
            calls.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return calls


def _common_module() -> Path:
    return LAUNCH_DIR / "dynik_launch_common.py"


def _common_arguments() -> dict[str, str]:
    """``ARGUMENTS`` of the shared launch module: name -> description (the tuple's second item)."""
    path = _common_module()
    if not path.exists():
        return {}
    for node in _tree(path).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign):
            target = node.targets[0]
        if isinstance(target, ast.Name) and target.id == "ARGUMENTS" and isinstance(node.value, ast.Dict):
            out = {}
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                assert isinstance(value, ast.Tuple) and len(value.elts) == 3, ast.unparse(value)
                out[_literal(key)] = _literal(value.elts[1]) or ""
            return out
    raise AssertionError(f"{path.name} defines no ARGUMENTS dict")


def _module_tuple(tree: ast.Module, name: str) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"no module-level tuple {name}")


def _declared_arguments(path: Path) -> dict[str, str | None]:
    """Launch arguments a file declares: name -> description (None when missing).

    Understands ``DeclareLaunchArgument('name', description=...)`` and the shared module's
    ``declare('a', 'b', *ARGUMENTS)`` (descriptions from its ``ARGUMENTS`` table)."""
    tree, common = _tree(path), _common_arguments()
    out: dict[str, str | None] = {}
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        name = _call_name(call)
        if name == "DeclareLaunchArgument":
            arg_name = _literal(call.args[0]) if call.args else _literal(_keyword(call, "name"))
            if arg_name is None:  # the shared module's generic declare(): checked through ARGUMENTS
                assert path == _common_module(), f"{path.name}: DeclareLaunchArgument with a computed name"
                assert _keyword(call, "description") is not None, "declare() must pass description="
                continue
            description = _keyword(call, "description")
            out[arg_name] = _literal(description) if description is not None else None
        elif name == "declare":
            names: list[str] = []
            for arg in call.args:
                if isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name):
                    names += _module_tuple(tree, arg.value.id)
                else:
                    assert _literal(arg) is not None, f"{path.name}: declare() takes literal names"
                    names.append(_literal(arg))
            for arg_name in names:
                assert arg_name in common, f"{path.name}: '{arg_name}' is not in ARGUMENTS"
                out[arg_name] = common[arg_name]
    return out


def _documented_arguments() -> tuple[Path, set[str]]:
    """Argument names in the first column of the README's launch-argument table."""
    readme = ROOT / "README.md"
    if not (readme.is_file() and TABLE_HEADING.search(readme.read_text(encoding="utf-8"))):
        readme = LAUNCH_DIR / "README.md"
    assert readme.is_file(), "no launch-argument table: README.md and launch/README.md both lack one"
    text = readme.read_text(encoding="utf-8")
    heading = TABLE_HEADING.search(text)
    assert heading, f"{readme.relative_to(ROOT)} has no '... launch arguments' heading"
    section = text[heading.end() :]
    following = re.search(r"^#+\s", section, re.MULTILINE)
    section = section[: following.start()] if following else section
    return readme, set(TABLE_ROW.findall(section))


# --- structure --------------------------------------------------------------------------------------


def test_the_issue_launch_files_exist():
    names = {p.name for p in LAUNCH_FILES}
    assert REQUIRED <= names, f"missing: {sorted(REQUIRED - names)}"


@pytest.mark.parametrize("path", PY_FILES, ids=_ids(PY_FILES))
def test_launch_python_compiles(path, tmp_path):
    py_compile.compile(str(path), cfile=str(tmp_path / "out.pyc"), doraise=True)


@pytest.mark.parametrize("path", PY_FILES, ids=_ids(PY_FILES))
def test_start_up_handlers_fire_once_and_only_at_start_up(path):
    """The auto-lifecycle handlers act on the start-up transitions only, once: a later ``ros2 lifecycle set
    <node> deactivate`` (active -> deactivating -> inactive) used to match goal_state='inactive' and be
    undone 13 ms later by an automatic activate, so a user could not stop the robot; and a node reaching
    'active' again re-sent 'configure' to the next node ("Unable to start transition 1 from current state
    active")."""
    expected_start = {"inactive": "configuring", "active": "activating"}
    for call in ast.walk(_tree(path)):
        if not (isinstance(call, ast.Call) and _call_name(call) == "OnStateTransition"):
            continue
        goal = _literal(_keyword(call, "goal_state"))
        where = f"{path.name}:{call.lineno}"
        assert _literal(_keyword(call, "start_state")) == expected_start.get(goal), (
            f"{where}: OnStateTransition(goal_state={goal!r}) must also name start_state="
            f"{expected_start.get(goal)!r}"
        )
        once = _keyword(call, "handle_once")
        assert isinstance(once, ast.Constant) and once.value is True, f"{where}: handle_once=True is missing"


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=_ids(LAUNCH_FILES))
def test_launch_file_defines_generate_launch_description(path):
    functions = {n.name: n for n in _tree(path).body if isinstance(n, ast.FunctionDef)}
    assert "generate_launch_description" in functions, path.name
    args = functions["generate_launch_description"].args
    assert len(args.args) == len(args.defaults) and not args.kwonlyargs, (
        "it must be callable without arguments"
    )


# --- executables --------------------------------------------------------------------------------------


def _executables(path: Path) -> list[tuple[str, str]]:
    """``(package, executable)`` of every ``executable=`` literal (package defaults to dynik_ros, as in the
    shared module's wrapper); a computed executable is only allowed in a wrapper taking ``executable``."""
    tree = _tree(path)
    found = []
    for scope in _scopes(tree):
        params = {a.arg for a in getattr(getattr(scope, "args", None), "kwonlyargs", [])}
        params |= {a.arg for a in getattr(getattr(scope, "args", None), "args", [])}
        for call in _own_calls(scope):
            value = _keyword(call, "executable")
            if value is None:
                continue
            executable = _literal(value)
            if executable is None:
                assert isinstance(value, ast.Name) and value.id in params, (
                    f"{path.name}: computed executable {ast.unparse(value)} outside a wrapper taking it"
                )
                package = _keyword(call, "package")
                assert package is None or isinstance(package, ast.Name) or _literal(package) == PACKAGE, (
                    f"{path.name}: a wrapper may only start {PACKAGE} executables"
                )
                continue
            package = _literal(_keyword(call, "package")) or PACKAGE
            found.append((package, executable))
    return found


@pytest.mark.parametrize("path", PY_FILES, ids=_ids(PY_FILES))
def test_every_executable_is_installed(path):
    scripts, depends = _console_scripts(), _exec_depends()
    for package, executable in _executables(path):
        if package == PACKAGE:
            assert executable in scripts, (
                f"{path.name}: '{executable}' is not in setup.py CONSOLE_SCRIPTS, so not in lib/{PACKAGE}/"
            )
        else:
            assert package in depends, (
                f"{path.name}: runs {package}/{executable}; package.xml lacks {package}"
            )


def test_every_node_is_launched_somewhere():
    launched = {e for p in PY_FILES for pkg, e in _executables(p) if pkg == PACKAGE}
    assert NODE_EXECUTABLES <= launched, f"never launched: {sorted(NODE_EXECUTABLES - launched)}"


# --- files --------------------------------------------------------------------------------------------


def _named_files(path: Path) -> list[str]:
    return [
        n.value
        for n in ast.walk(_tree(path))
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith(SHARE_SUFFIXES)
    ]


@pytest.mark.parametrize("path", PY_FILES, ids=_ids(PY_FILES))
def test_named_share_files_exist_and_are_installed(path):
    share_dirs = set(_setup_literal("SHARE_DIRS"))
    for name in _named_files(path):
        assert SHARE_FILE.match(name), (
            f"{path.name}: '{name}' must be named relative to the share directory (config/..., urdf/..., "
            "launch/...) so this test can check it"
        )
        file = ROOT / name
        assert file.is_file(), f"{path.name} names {name}, which does not exist"
        parts = Path(name).parts
        assert parts[0] in share_dirs, f"{name}: setup.py SHARE_DIRS {sorted(share_dirs)} does not install it"
        assert not any(p.startswith(".") or p == "__pycache__" for p in parts), f"{name} is not installed"


def test_thin_launch_files_include_existing_launch_files():
    for path in LAUNCH_FILES:
        for name in _named_files(path):
            if name.startswith("launch/"):
                assert (ROOT / name).is_file() and name != f"launch/{path.name}", (path.name, name)


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=_ids(LAUNCH_FILES))
def test_wrappers_pass_their_arguments_on_instead_of_fixing_them(path):
    """An include with ``launch_arguments={"robot": "g1"}`` overrides what the user typed: ``robot:=icub``
    was silently ignored while ``--show-args`` still listed it. Wrappers declare the argument with their
    default and pass ``LaunchConfiguration`` on."""
    for call in ast.walk(_tree(path)):
        if not (isinstance(call, ast.Call) and _call_name(call) == "IncludeLaunchDescription"):
            continue
        for d in ast.walk(_keyword(call, "launch_arguments") or ast.Constant(None)):
            if isinstance(d, ast.Dict):
                fixed = [
                    ast.unparse(k)
                    for k, v in zip(d.keys, d.values, strict=True)
                    if isinstance(v, ast.Constant)
                ]
                assert not fixed, f"{path.name}:{call.lineno}: arguments {fixed} fixed to literals"


# --- arguments --------------------------------------------------------------------------------------


def test_shared_argument_descriptions_are_not_empty():
    for name, description in _common_arguments().items():
        assert description and description.strip(), f"ARGUMENTS['{name}'] has no description"
    calls = [n for n in ast.walk(_tree(_common_module())) if isinstance(n, ast.Call)]
    declares = [c for c in calls if _call_name(c) == "DeclareLaunchArgument"]
    assert declares, "the shared module declares no arguments"
    for call in declares:
        assert _keyword(call, "description") is not None, f"no description= in {ast.unparse(call)[:100]}"


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=_ids(LAUNCH_FILES))
def test_every_argument_has_a_description_and_is_documented(path):
    readme, documented = _documented_arguments()
    for name, description in _declared_arguments(path).items():
        assert description, f"{path.name}: DeclareLaunchArgument('{name}') has no description"
        assert name in documented, (
            f"{path.name}: argument '{name}' is missing from {readme.relative_to(ROOT)}"
        )


def test_the_table_documents_only_real_arguments():
    readme, documented = _documented_arguments()
    declared = {name for path in LAUNCH_FILES for name in _declared_arguments(path)}
    assert documented == declared, (
        f"{readme.relative_to(ROOT)}: undocumented {sorted(declared - documented)}, "
        f"stale rows {sorted(documented - declared)}"
    )


# --- lifecycle --------------------------------------------------------------------------------------


def _transitions(calls: list[ast.Call], emitters: set[str]) -> set[str]:
    """``TRANSITION_*`` names requested by ``emitters`` calls among ``calls``."""
    names = set()
    for call in calls:
        if _call_name(call) in emitters:
            for node in ast.walk(call):
                if isinstance(node, ast.Attribute) and node.attr.startswith("TRANSITION_"):
                    names.add(node.attr)
    return names


@pytest.mark.parametrize("path", PY_FILES, ids=_ids(PY_FILES))
def test_lifecycle_nodes_are_configured_and_activated_automatically(path):
    """Wherever a LifecycleNode is created, the same function registers an OnStateTransition handler that
    activates it on reaching 'inactive', and requests its 'configure' transition."""
    tree = _tree(path)
    # EmitEvent / ChangeState, and module functions that wrap them (e.g. _change_state(node, TRANSITION_X))
    emitters = {"EmitEvent", "ChangeState"} | {
        f.name
        for f in tree.body
        if isinstance(f, ast.FunctionDef) and any(_call_name(c) == "ChangeState" for c in _own_calls(f))
    }
    for scope in _scopes(tree):
        calls = _own_calls(scope)
        if not any(_call_name(c) == "LifecycleNode" for c in calls):
            continue
        where = f"{path.name}:{getattr(scope, 'name', '<module>')}"
        inactive = [
            c
            for c in calls
            if _call_name(c) == "OnStateTransition" and _literal(_keyword(c, "goal_state")) == "inactive"
        ]
        assert inactive, (
            f"{where}: a LifecycleNode without an OnStateTransition(goal_state='inactive') handler"
        )
        inside = [c for h in inactive for c in ast.walk(h) if isinstance(c, ast.Call)]
        assert "TRANSITION_ACTIVATE" in _transitions(inside, emitters), (
            f"{where}: reaching 'inactive' must emit TRANSITION_ACTIVATE"
        )
        assert "TRANSITION_CONFIGURE" in _transitions(calls, emitters), f"{where}: nothing requests configure"
        assert any(_call_name(c) == "RegisterEventHandler" for c in calls), (
            f"{where}: handlers not registered"
        )


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=_ids(LAUNCH_FILES))
def test_dynik_nodes_are_lifecycle_nodes(path):
    """The four nodes are only started through LifecycleNode or the shared managed_lifecycle_node()."""
    for call in (n for n in ast.walk(_tree(path)) if isinstance(n, ast.Call)):
        if _literal(_keyword(call, "executable")) in NODE_EXECUTABLES:
            assert _call_name(call) in ("LifecycleNode", "managed_lifecycle_node"), ast.unparse(call)[:120]
    # a launch file either starts a pipeline / nodes, or includes one that does
    source = path.read_text(encoding="utf-8")
    assert any(k in source for k in ("pipeline(", "LifecycleNode(", "Node(", "IncludeLaunchDescription(")), (
        path
    )


# --- RViz ---------------------------------------------------------------------------------------------


def test_rviz_config_shows_robot_tf_and_markers_in_world():
    config = yaml.safe_load((ROOT / "config" / "dynik.rviz").read_text(encoding="utf-8"))
    manager = config["Visualization Manager"]
    assert manager["Global Options"]["Fixed Frame"] == "world"
    displays = {d["Class"].split("/")[-1]: d for d in manager["Displays"]}
    assert {"RobotModel", "TF", "MarkerArray"} <= set(displays)
    robot = displays["RobotModel"]
    assert (
        robot["Description Source"] == "Topic" and robot["Description Topic"]["Value"] == "/robot_description"
    )
    assert robot["Description Topic"]["Durability Policy"] == "Transient Local"  # robot_state_publisher's QoS
    markers = displays["MarkerArray"]
    assert markers["Topic"]["Value"] == "/dynik/markers" and markers["Enabled"]
    assert {"targets", "achieved", "skeleton"} <= set(markers["Namespaces"])


# --- with the real launch API (a ROS 2 install) -----------------------------------------------------


@pytest.fixture(scope="module")
def launch_api():
    launch = pytest.importorskip("launch", reason="launch (ROS 2) is not installed")
    pytest.importorskip("launch_ros", reason="launch_ros (ROS 2) is not installed")
    from launch.launch_description_sources import get_launch_description_from_python_launch_file

    return launch, get_launch_description_from_python_launch_file


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=_ids(LAUNCH_FILES))
def test_launch_file_loads_with_the_launch_api(launch_api, path):
    launch, load = launch_api
    description = load(str(path))
    assert isinstance(description, launch.LaunchDescription)
    _, documented = _documented_arguments()
    for argument in description.get_launch_arguments():
        assert argument.description and argument.description != "no description given", argument.name
        assert argument.name in documented, argument.name


def _build(launch_api, path: Path, **values: str) -> list:
    """The actions a launch file's OpaqueFunction returns for ``values`` (defaults elsewhere)."""
    launch, load = launch_api
    from launch.actions import DeclareLaunchArgument, OpaqueFunction

    description = load(str(path))
    context = launch.LaunchContext()
    for entity in description.entities:
        if isinstance(entity, DeclareLaunchArgument):
            default = values.get(entity.name)
            if default is None and entity.default_value is not None:
                default = "".join(s.perform(context) for s in entity.default_value)
            context.launch_configurations[entity.name] = default or ""
    (opaque,) = [e for e in description.entities if isinstance(e, OpaqueFunction)]
    return opaque.execute(context)


def test_pipelines_build_with_the_launch_api(launch_api, tmp_path):
    """Build (without running) the pipelines: every dynik node is a LifecycleNode with its handlers."""
    import launch_ros.actions
    from launch.actions import RegisterEventHandler

    from dynik_ros.io.bags import write_link_states

    bag = write_link_states(
        tmp_path / "bag", [(1.0, {"Pelvis": ((0.0, 0.0, 1.0), ((1, 0, 0), (0, 1, 0), (0, 0, 1)))}, {})]
    )
    cases = {
        "human_tracking.launch.py": ({}, {"wearable_node", "ik_node"}),
        "retargeting.launch.py": ({"use_mocap": "true", "sim": "true"}, NODE_EXECUTABLES),
        "replay.launch.py": ({"bag_path": str(bag)}, {"wearable_node", "ik_node"}),
    }
    for name, (values, expected) in cases.items():
        actions = _build(launch_api, LAUNCH_DIR / name, **values)
        nodes = [a for a in actions if isinstance(a, launch_ros.actions.LifecycleNode)]
        assert {n.node_executable for n in nodes} == expected, name
        handlers = [a for a in actions if isinstance(a, RegisterEventHandler)]
        assert len(handlers) >= len(nodes), f"{name}: every lifecycle node needs its activation handler"
