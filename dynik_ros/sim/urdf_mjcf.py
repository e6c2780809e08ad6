"""URDF -> MuJoCo model for the simulated robot: the same URDF the IK reads, made simulable.

What is changed on the way (the kinematics, inertias, joint ranges and dynamics tags are MuJoCo's own URDF
import):

* ``<visual>`` elements are dropped (headless; nothing renders them) and collision mesh paths are made
  absolute: ``package://<pkg>/<rest>`` is looked up in the ament share directories, the
  ``example-robot-data`` robots directory, and the ancestors of the URDF's directory; relative paths are
  taken from the URDF's directory.
* Collision meshes MuJoCo cannot read (Collada ``.dae`` and others) are loaded with assimp (through coal,
  pinocchio's collision library) and replaced by their convex hull as an in-memory STL; MuJoCo collides
  meshes by their convex hull anyway.
* The root link gets a free joint (floating base), the world a ground plane. Robot geoms collide with the
  ground only (``self_collision`` adds robot-robot contacts; parent-child pairs are always excluded).
* ``<mimic>`` joints follow their leader through a joint equality (``q_f = offset + multiplier q_l``).
* Every other 1-DoF joint gets a ``<position>`` actuator; its force range is the URDF ``effort`` limit
  where one is given (:mod:`dynik_ros.sim.simulator` sets the gains).
"""

from __future__ import annotations

import hashlib
import os
import struct
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MUJOCO_MESH_FORMATS = (".stl", ".obj", ".msh")


class UrdfSimError(ValueError):
    """A URDF that cannot be turned into a MuJoCo model; the message names the file and element."""


@dataclass
class UrdfJointInfo:
    """What the sim needs of one URDF joint beyond MuJoCo's import."""

    name: str
    type: str
    effort: float | None = None  # N m or N; None when the URDF gives none (or 0)
    velocity: float | None = None
    mimic: tuple[str, float, float] | None = None  # (leader, multiplier, offset)


@dataclass
class PreparedUrdf:
    """A URDF ready for MuJoCo's compiler: XML text, in-memory mesh assets and per-joint details."""

    xml: str
    assets: dict[str, bytes]
    root_link: str
    joints: dict[str, UrdfJointInfo] = field(default_factory=dict)
    converted_meshes: int = 0
    repaired_inertias: list[str] = field(default_factory=list)


def _package_roots(package: str, urdf_dir: Path) -> list[Path]:
    """Candidate directories for ``package://<package>/``."""
    roots: list[Path] = []
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            roots.append(Path(prefix, "share", package))
    if package == "example-robot-data":
        try:
            from dynik_ros.retarget.registry import example_robot_data_dir

            roots.append(example_robot_data_dir().parent)
        except FileNotFoundError:
            pass
    for ancestor in [urdf_dir, *urdf_dir.parents]:
        if ancestor.name == package:
            roots.append(ancestor)
        roots.append(ancestor / package)
    return roots


def resolve_mesh_path(filename: str, urdf_path: Path) -> Path:
    """Absolute path of a URDF mesh ``filename`` (``package://``, ``file://``, absolute or relative)."""
    urdf_dir = urdf_path.parent
    if filename.startswith("package://"):
        package, _, rest = filename[len("package://") :].partition("/")
        for root in _package_roots(package, urdf_dir):
            candidate = root / rest
            if candidate.is_file():
                return candidate.resolve()
        raise UrdfSimError(f"{urdf_path}: mesh '{filename}' not found (package '{package}' not located)")
    if filename.startswith("file://"):
        filename = filename[len("file://") :]
    path = Path(filename)
    if not path.is_absolute():
        path = urdf_dir / path
    if not path.is_file():
        raise UrdfSimError(f"{urdf_path}: mesh '{filename}' not found ({path})")
    return path.resolve()


def convex_hull_stl(vertices: np.ndarray) -> bytes:
    """Binary STL of the convex hull of ``vertices`` (N x 3)."""
    from scipy.spatial import ConvexHull

    hull = ConvexHull(np.asarray(vertices, dtype=float))
    triangles = hull.points[hull.simplices]
    out = [b"dynik_ros convex hull".ljust(80, b" "), struct.pack("<I", len(triangles))]
    centre = hull.points[hull.vertices].mean(axis=0)
    for tri in triangles:
        normal = np.cross(tri[1] - tri[0], tri[2] - tri[0])
        if np.dot(normal, tri[0] - centre) < 0:  # outward winding
            tri = tri[[0, 2, 1]]
            normal = -normal
        norm = np.linalg.norm(normal)
        normal = normal / norm if norm > 0 else normal
        out.append(struct.pack("<12fH", *normal, *tri.reshape(-1), 0))
    return b"".join(out)


def _mesh_vertices(path: Path) -> np.ndarray:
    """Vertices of any mesh assimp reads (unscaled)."""
    import coal

    try:
        mesh = coal.MeshLoader().load(str(path), np.ones(3))
    except Exception as exc:  # assimp's errors come as RuntimeError or ValueError
        raise UrdfSimError(f"mesh {path}: cannot be read ({exc})") from None
    vertices = np.asarray(mesh.vertices(), dtype=float)
    if vertices.shape[0] < 4:
        raise UrdfSimError(f"mesh {path}: fewer than 4 vertices")
    return vertices


def _float_attr(element: ElementTree.Element | None, name: str) -> float | None:
    if element is None or element.get(name) is None:
        return None
    try:
        return float(element.get(name))
    except ValueError:
        return None


_INERTIA_KEYS = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")


def _repair_inertia(inertial: ElementTree.Element) -> bool:
    """Make a URDF inertia tensor positive definite: eigenvalues raised to 1e-6 of the largest and to
    that of a 1 cm sphere of the link's mass (iCub's ``r_hip_1`` has 0.754 kg and zero inertia, its
    ``l_ankle_2`` a negative eigenvalue: MuJoCo refuses both). True if it was changed."""
    inertia = inertial.find("inertia")
    if inertia is None:
        return False
    mass = _float_attr(inertial.find("mass"), "value") or 0.0
    values = [_float_attr(inertia, key) or 0.0 for key in _INERTIA_KEYS]
    ixx, ixy, ixz, iyy, iyz, izz = values
    tensor = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    if not np.any(tensor) and mass <= 0:
        return False  # a massless frame link: MuJoCo accepts it
    eigenvalues, vectors = np.linalg.eigh(tensor)
    floor = max(1e-9, 1e-6 * float(np.max(np.abs(eigenvalues))), 0.4 * mass * 0.01**2)
    if np.all(eigenvalues >= floor):
        return False
    fixed = vectors @ np.diag(np.maximum(eigenvalues, floor)) @ vectors.T
    for key, (i, j) in zip(_INERTIA_KEYS, ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)), strict=True):
        inertia.set(key, repr(float(fixed[i, j])))
    return True


def prepare_urdf(urdf_path: str | Path) -> PreparedUrdf:
    """Read a URDF and rewrite it for MuJoCo's compiler (see the module docstring)."""
    path = Path(urdf_path)
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError) as exc:
        raise UrdfSimError(f"{path}: cannot read the URDF ({exc})") from None
    if root.tag != "robot":
        raise UrdfSimError(f"{path}: root element is <{root.tag}>, expected <robot>")
    for element in list(root):
        if element.tag in ("mujoco", "gazebo", "transmission"):
            root.remove(element)
    assets: dict[str, bytes] = {}
    converted = 0
    hull_cache: dict[Path, str] = {}
    repaired: list[str] = []
    for link in root.iter("link"):
        inertial = link.find("inertial")
        if inertial is not None and _repair_inertia(inertial):
            repaired.append(link.get("name", "?"))
        for visual in link.findall("visual"):
            link.remove(visual)
        for collision in link.findall("collision"):
            mesh = collision.find("geometry/mesh")
            if mesh is None:
                continue
            mesh_path = resolve_mesh_path(mesh.get("filename", ""), path)
            if mesh_path.suffix.lower() in MUJOCO_MESH_FORMATS:
                mesh.set("filename", str(mesh_path))
                continue
            name = hull_cache.get(mesh_path)
            if name is None:
                digest = hashlib.sha1(str(mesh_path).encode()).hexdigest()[:12]
                name = f"hull_{mesh_path.stem}_{digest}.stl"
                assets[name] = convex_hull_stl(_mesh_vertices(mesh_path))
                hull_cache[mesh_path] = name
                converted += 1
            mesh.set("filename", name)
    joints: dict[str, UrdfJointInfo] = {}
    children = set()
    for joint in root.iter("joint"):
        name, kind = joint.get("name", ""), joint.get("type", "")
        child = joint.find("child")
        if child is not None:
            children.add(child.get("link"))
        if kind not in ("revolute", "continuous", "prismatic"):
            continue
        limit = joint.find("limit")
        effort = _float_attr(limit, "effort")
        velocity = _float_attr(limit, "velocity")
        mimic = joint.find("mimic")
        info = UrdfJointInfo(
            name,
            kind,
            effort if effort is not None and effort > 0 else None,
            velocity if velocity is not None and velocity > 0 else None,
        )
        if mimic is not None and mimic.get("joint"):
            info.mimic = (
                mimic.get("joint"),
                _float_attr(mimic, "multiplier") if mimic.get("multiplier") else 1.0,
                _float_attr(mimic, "offset") if mimic.get("offset") else 0.0,
            )
        joints[name] = info
    roots = [link.get("name") for link in root.iter("link") if link.get("name") not in children]
    if len(roots) != 1:
        raise UrdfSimError(f"{path}: expected one root link, found {roots}")
    compiler = ElementTree.SubElement(ElementTree.SubElement(root, "mujoco"), "compiler")
    compiler.attrib.update(
        {"strippath": "false", "fusestatic": "false", "discardvisual": "true", "balanceinertia": "true"}
    )
    xml = ElementTree.tostring(root, encoding="unicode")
    return PreparedUrdf(xml, assets, roots[0], joints, converted, repaired)
