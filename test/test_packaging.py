"""Packaging checks: package.xml, setup.py's console scripts, and a real wheel build.

The wheel build (and an install of that wheel into a throwaway venv) checks what
launch_ros relies on after a pip install: the ament index marker, share/dynik_ros/
and one executable launcher per console script in <prefix>/lib/dynik_ros/.
"""

from __future__ import annotations

import ast
import configparser
import os
import shutil
import subprocess
import sys
import textwrap
import venv
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "dynik_ros"
SHARE_DIRS = ("launch", "config", "urdf")
IGNORED_PARTS = {"__pycache__"}

# Top-level import name -> rosdep key that must appear in package.xml.  Only the
# modules listed here are checked, so new stdlib or in-package imports never break
# this test; add a row when the package starts importing something new.
IMPORT_TO_ROSDEP = {
    "rclpy": "rclpy",
    "lifecycle_msgs": "lifecycle_msgs",
    "builtin_interfaces": "builtin_interfaces",
    "std_msgs": "std_msgs",
    "std_srvs": "std_srvs",
    "sensor_msgs": "sensor_msgs",
    "geometry_msgs": "geometry_msgs",
    "nav_msgs": "nav_msgs",
    "trajectory_msgs": "trajectory_msgs",
    "visualization_msgs": "visualization_msgs",
    "diagnostic_msgs": "diagnostic_msgs",
    "tf2_msgs": "tf2_msgs",
    "tf2_ros": "tf2_ros",
    "rcl_interfaces": "rcl_interfaces",
    "rosgraph_msgs": "rosgraph_msgs",
    "ament_index_python": "ament_index_python",
    "launch": "launch",
    "launch_ros": "launch_ros",
    "rosbag2_py": "rosbag2_py",
    "numpy": "python3-numpy",
    "scipy": "python3-scipy",
    "yaml": "python3-yaml",
    "matplotlib": "python3-matplotlib",
    "PIL": "python3-pil",
    "pinocchio": "pinocchio",
    "osqp": "python3-osqp-pip",
    "daqp": "python3-daqp-pip",
    "mujoco": "python3-mujoco-pip",
    "rosbags": "python3-rosbags-pip",
    "urdf_parser_py": "urdfdom_py",
    "example_robot_data": "example-robot-data",
    "pytest": "python3-pytest",
}
# Dotted imports that need a key besides their top-level one.
SUBMODULE_TO_ROSDEP = {
    "rclpy.lifecycle": "lifecycle_msgs",
}
RUN_TAGS = {"depend", "exec_depend"}
TEST_TAGS = RUN_TAGS | {"test_depend"}


def _package_xml() -> ET.Element:
    return ET.parse(ROOT / "package.xml").getroot()


def _declared(tags: set[str]) -> set[str]:
    return {(el.text or "").strip() for el in _package_xml() if el.tag in tags}


def _console_scripts() -> list[str]:
    """CONSOLE_SCRIPTS from setup.py, read with ast (setup.py is not executed)."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "CONSOLE_SCRIPTS" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise AssertionError("setup.py defines no CONSOLE_SCRIPTS list")


def _parse_entry(entry: str) -> tuple[str, str, str]:
    name, target = (part.strip() for part in entry.split("=", 1))
    module, func = (part.strip() for part in target.split(":", 1))
    return name, module, func


def _py_files(*dirs: str) -> list[Path]:
    files = []
    for d in dirs:
        base = ROOT / d
        if base.is_dir():
            files += [p for p in sorted(base.rglob("*.py")) if not IGNORED_PARTS & set(p.parts)]
    return files


def _share_files() -> list[str]:
    """Files under launch/, config/, urdf/ as setup.py globs them, relative to ROOT."""
    out = []
    for d in SHARE_DIRS:
        base = ROOT / d
        if not base.is_dir():
            continue
        for p in sorted(base.rglob("*")):
            rel = p.relative_to(ROOT)
            if (
                p.is_file()
                and not IGNORED_PARTS & set(rel.parts)
                and not any(part.startswith(".") for part in rel.parts)
                and not p.name.endswith((".pyc", ".pyo", "~"))
            ):
                out.append(rel.as_posix())
    return out


def _imported_modules(path: Path) -> set[str]:
    """Absolute module names imported anywhere in a file (including inside functions / try)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _required_keys(modules: set[str]) -> set[str]:
    keys = set()
    for module in modules:
        top = module.split(".", 1)[0]
        if top in IMPORT_TO_ROSDEP:
            keys.add(IMPORT_TO_ROSDEP[top])
        for prefix, key in SUBMODULE_TO_ROSDEP.items():
            if module == prefix or module.startswith(prefix + "."):
                keys.add(key)
    return keys


# --- package.xml ---------------------------------------------------------------------------


def test_package_xml_is_format3_ament_python():
    root = _package_xml()
    assert root.tag == "package"
    assert root.get("format") == "3"
    assert root.findtext("name") == PACKAGE
    assert root.findtext("license") == "Apache-2.0"
    assert root.findtext("export/build_type") == "ament_python"
    assert root.find("maintainer") is not None and root.find("maintainer").get("email")


def test_package_xml_version_matches_the_python_package():
    init = ast.parse((ROOT / PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    versions = [
        ast.literal_eval(node.value)
        for node in init.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)
    ]
    assert versions == [_package_xml().findtext("version")], (
        "keep dynik_ros.__version__ equal to package.xml's <version> (setup.py reads the latter)"
    )


@pytest.mark.parametrize(
    ("dirs", "tags"),
    [((PACKAGE, "launch"), RUN_TAGS), (("test",), TEST_TAGS)],
    ids=["run", "test"],
)
def test_package_xml_declares_every_imported_dependency(dirs, tags):
    declared = _declared(tags)
    missing: dict[str, list[str]] = {}
    for path in _py_files(*dirs):
        for key in sorted(_required_keys(_imported_modules(path)) - declared):
            missing.setdefault(key, []).append(path.relative_to(ROOT).as_posix())
    tag = "exec_depend" if tags == RUN_TAGS else "test_depend"
    assert not missing, "package.xml lacks rosdep keys for imports:\n" + "\n".join(
        f"  <{tag}>{key}</{tag}>  (imported by {', '.join(files)})" for key, files in sorted(missing.items())
    )


# --- setup.py / setup.cfg ------------------------------------------------------------------


def test_setup_cfg_installs_executables_in_lib_package():
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(ROOT / "setup.cfg")
    assert cfg.get("develop", "script_dir") == f"$base/lib/{PACKAGE}"
    assert cfg.get("install", "install_scripts") == f"$base/lib/{PACKAGE}"


def test_console_script_names_are_unique():
    names = [_parse_entry(e)[0] for e in _console_scripts()]
    assert len(names) == len(set(names)), names


@pytest.mark.parametrize("entry", _console_scripts(), ids=lambda e: _parse_entry(e)[0])
def test_console_scripts_point_at_real_functions(entry):
    """Each console script's module file exists and defines its function at top level."""
    name, module, func = _parse_entry(entry)
    rel = Path(*module.split("."))
    candidates = [ROOT / rel.with_suffix(".py"), ROOT / rel / "__init__.py"]
    source = next((p for p in candidates if p.is_file()), None)
    assert source is not None, f"{name}: module {module} not found ({rel}.py)"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    defined = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
    assert func in defined, f"{name}: {source.relative_to(ROOT)} defines no top-level {func}()"


# --- a real build --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """`pip wheel . --no-deps --no-build-isolation` on a copy of the packaging inputs.

    Built from a copy so the test neither litters the work tree (build/, *.egg-info)
    nor races a concurrent `pip install -e .` there.
    """
    src = tmp_path_factory.mktemp("src")
    for name in ("setup.py", "setup.cfg", "package.xml"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for d in ("resource", PACKAGE, *SHARE_DIRS):
        if (ROOT / d).is_dir():
            shutil.copytree(ROOT / d, src / d, ignore=ignore)
    out = tmp_path_factory.mktemp("wheelhouse")
    cmd = [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation"]
    cmd += ["--disable-pip-version-check", "--no-input", "-q", "-w", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheels = list(out.glob(f"{PACKAGE}-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def _data_prefix(zf: zipfile.ZipFile) -> str:
    prefixes = {n.split("/", 1)[0] for n in zf.namelist() if n.split("/", 1)[0].endswith(".data")}
    assert len(prefixes) == 1, prefixes
    return prefixes.pop() + "/data/"


def test_wheel_has_ament_index_marker_and_share_files(wheel):
    with zipfile.ZipFile(wheel) as zf:
        data = _data_prefix(zf)
        names = set(zf.namelist())
        expected = [
            f"share/ament_index/resource_index/packages/{PACKAGE}",
            f"share/{PACKAGE}/package.xml",
            *(f"share/{PACKAGE}/{rel}" for rel in _share_files()),
        ]
        missing = [e for e in expected if data + e not in names]
        assert not missing, f"missing from {wheel.name}: {missing}"
        assert f"{PACKAGE}/__init__.py" in names
        assert not any(n.startswith("test/") for n in names)


def test_wheel_ships_executable_launchers_in_lib_package(wheel):
    scripts = [_parse_entry(e) for e in _console_scripts()]
    with zipfile.ZipFile(wheel) as zf:
        data = _data_prefix(zf)
        entry_points = next(n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt"))
        entry_text = zf.read(entry_points).decode()
        for name, module, func in scripts:
            info = zf.getinfo(f"{data}lib/{PACKAGE}/{name}")
            mode = info.external_attr >> 16
            assert mode & 0o111 == 0o111, f"lib/{PACKAGE}/{name} is not executable: {oct(mode)}"
            text = zf.read(info).decode()
            assert text.startswith("#!/bin/sh\n")
            assert f"from {module} import {func}" in text
            assert f"{name} = {module}:{func}" in entry_text


def test_pip_installed_launcher_runs_the_venv_python(wheel, tmp_path):
    """Install the wheel into a plain venv; its lib/dynik_ros launcher must run that venv's
    Python without the venv being activated, and the ament index must find the package."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    cmd = [sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "install"]
    cmd += ["--no-deps", "--no-index", "--disable-pip-version-check", "-q", str(wheel)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    name, module, func = _parse_entry(_console_scripts()[0])
    launcher = env_dir / "lib" / PACKAGE / name
    assert launcher.is_file() and os.access(launcher, os.X_OK), launcher
    assert (env_dir / "share/ament_index/resource_index/packages" / PACKAGE).is_file()

    # Stand-in for the node module (first on PYTHONPATH): reports what the launcher ran.
    probe = tmp_path / "probe"
    *packages, leaf = module.split(".")
    for depth in range(1, len(packages) + 1):
        (probe.joinpath(*packages[:depth])).mkdir(parents=True, exist_ok=True)
        (probe.joinpath(*packages[:depth]) / "__init__.py").write_text("")
    (probe.joinpath(*packages) / f"{leaf}.py").write_text(
        textwrap.dedent(
            f"""
            import os, sys
            def {func}():
                print(sys.prefix)
                print(" ".join(sys.argv[1:]))
                print(os.environ.get("AMENT_PREFIX_PATH", ""))
                return 3
            """
        )
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(probe), "HOME": str(tmp_path)}
    run = subprocess.run(
        [str(launcher), "--ros-args", "-p", "x:=1"], capture_output=True, text=True, env=env, timeout=60
    )
    assert run.returncode == 3, run.stdout + run.stderr
    prefix, args, ament = run.stdout.splitlines()
    assert Path(prefix).resolve() == env_dir.resolve()
    assert args == "--ros-args -p x:=1"
    assert str(env_dir) in ament.split(":")

    ament_index_python = pytest.importorskip("ament_index_python")
    find = (
        "import sys; from ament_index_python.packages import get_package_prefix as g; "
        f"sys.stdout.write(g({PACKAGE!r}))"
    )
    env = dict(os.environ, AMENT_PREFIX_PATH=str(env_dir))
    got = subprocess.run([sys.executable, "-c", find], capture_output=True, text=True, env=env, timeout=60)
    assert got.returncode == 0, got.stderr
    assert got.stdout == str(env_dir), ament_index_python.__file__
