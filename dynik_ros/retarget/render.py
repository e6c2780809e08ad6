"""Look at a retargeting without ROS: the human skeleton and the robot side by side, headless.

Each frame draws two 3-D panels with matplotlib (Agg): the human's 23 segments as bones from each segment to
its parent (the input the robot was given), and the robot as bones between its joints' world positions
(forward kinematics of the written configuration), its soles in green while the retargeter counts the foot
in contact, red otherwise. Each panel follows its root horizontally inside a fixed 2 m box over a ground grid,
so walking shows as the grid passing underneath. Outputs: a PNG strip of evenly spaced frames, or an
animation (GIF with Pillow; MP4 through :func:`dynik_ros.io.ffmpeg.ffmpeg_program`). ROS-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pinocchio as pin

from dynik_ros.io import ffmpeg

HALF_WIDTH = 1.0  # [m] half the side of each panel's box around its root


def human_bones(names: Sequence[str]) -> list[tuple[int, int]]:
    """``(child, parent)`` index pairs of the Xsens segments present in ``names``."""
    from dynik_ros.models.human import XSENS_PARENT

    index = {n: i for i, n in enumerate(names)}
    return [(index[c], index[p]) for c, p in XSENS_PARENT.items() if c in index and p in index]


def robot_skeleton(robot: object, q: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """World positions of the robot's joints ``(J, 3)`` for configurations ``q`` ``(N, nq)`` → ``(N, J, 3)``
    and the ``(joint, parent)`` bones (the universe excluded)."""
    model = robot.model
    data = model.createData()
    out = np.empty((len(q), model.njoints, 3))
    for k, qk in enumerate(q):
        pin.forwardKinematics(model, data, qk)
        out[k] = [m.translation for m in data.oMi]
    bones = [(j, int(model.parents[j])) for j in range(2, model.njoints)]
    return out, bones


def sole_outlines(robot: object, q: np.ndarray, feet: Sequence[object]) -> np.ndarray:
    """World positions ``(N, n_feet, m, 3)`` of each foot's sole points (the map's ``feet[].sole``)."""
    model = robot.model
    data = model.createData()
    ids = [robot.frame_id(f.frame) for f in feet]
    soles = [np.array(f.sole, dtype=float).reshape(-1, 3) for f in feet]
    m = max((len(s) for s in soles), default=0)
    out = np.full((len(q), len(feet), m, 3), np.nan)
    for k, qk in enumerate(q):
        pin.framesForwardKinematics(model, data, qk)
        for f, (fid, sole) in enumerate(zip(ids, soles, strict=True)):
            placement = data.oMf[fid]
            out[k, f, : len(sole)] = sole @ placement.rotation.T + placement.translation
    return out


def _grid(centre: float, step: float = 0.25) -> np.ndarray:
    """World-fixed grid lines (multiples of ``step``) inside ``centre ± HALF_WIDTH``."""
    return np.arange(np.ceil((centre - HALF_WIDTH) / step), np.floor((centre + HALF_WIDTH) / step) + 1) * step


class SideBySide:
    """The two skeletons of a take, drawn frame by frame (see the module docstring)."""

    def __init__(
        self,
        human_names: Sequence[str],
        human_positions: np.ndarray,
        robot: object,
        q: np.ndarray,
        times: np.ndarray,
        feet: Sequence[object] = (),
        contacts: np.ndarray | None = None,
        robot_label: str = "robot",
    ):
        self.human = np.asarray(human_positions, dtype=float)
        self.human_bones = human_bones(human_names)
        self.human_root = list(human_names).index("Pelvis") if "Pelvis" in human_names else 0
        self.robot, self.robot_bones = robot_skeleton(robot, q)
        self.robot_root = 1
        self.soles = sole_outlines(robot, q, feet) if feet else np.zeros((len(q), 0, 0, 3))
        self.contacts = contacts if contacts is not None else np.full((len(q), len(feet)), -1)
        self.times = np.asarray(times, dtype=float)
        self.robot_label = robot_label

    def __len__(self) -> int:
        return len(self.times)

    def draw(self, figure: object, k: int) -> None:
        """Frame ``k`` on ``figure`` (cleared first)."""
        figure.clear()
        panels = (
            ("human", self.human[k], self.human_bones, self.human[k, self.human_root], "tab:orange"),
            (self.robot_label, self.robot[k], self.robot_bones, self.robot[k, self.robot_root], "tab:blue"),
        )
        for i, (title, points, bones, root, color) in enumerate(panels):
            ax = figure.add_subplot(1, 2, i + 1, projection="3d")
            cx, cy = float(root[0]), float(root[1])
            for g in _grid(cx):  # world-fixed lines: they pass underneath as the root moves
                ax.plot([g, g], [cy - HALF_WIDTH, cy + HALF_WIDTH], [0, 0], color="0.8", lw=0.6)
            for g in _grid(cy):
                ax.plot([cx - HALF_WIDTH, cx + HALF_WIDTH], [g, g], [0, 0], color="0.8", lw=0.6)
            for child, parent in bones:
                seg = points[[parent, child]]
                ax.plot(seg[:, 0], seg[:, 1], seg[:, 2], color=color, lw=2.0)
            if i == 1:
                for f in range(self.soles.shape[1]):
                    sole = self.soles[k, f]
                    sole = sole[np.isfinite(sole[:, 0])]
                    standing = self.contacts[k, f] >= 0 if self.contacts.size else False
                    ax.plot(
                        sole[:, 0], sole[:, 1], sole[:, 2], color="tab:green" if standing else "tab:red", lw=3
                    )
            ax.set_xlim(cx - HALF_WIDTH, cx + HALF_WIDTH)
            ax.set_ylim(cy - HALF_WIDTH, cy + HALF_WIDTH)
            ax.set_zlim(0.0, 2.0 * HALF_WIDTH)
            ax.set_box_aspect((1, 1, 1))
            ax.view_init(elev=15, azim=-60)
            ax.set_title(f"{title}  t = {self.times[k]:.2f} s", fontsize=9)
            ax.set_xticklabels([])
            ax.set_yticklabels([])
            ax.set_zticklabels([])


def check_video_path(path: str | Path) -> Path:
    """``path`` if its extension names a format we can write here, else :class:`ValueError` saying why."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".png", ".gif", ".mp4"):
        raise ValueError(f"--video {path}: the format comes from the extension: .png (strip), .gif or .mp4")
    if suffix == ".mp4" and _use_ffmpeg() is None:
        raise ValueError(f"--video {path}: {ffmpeg.MISSING}; write a .gif or .png")
    return path


def _use_ffmpeg() -> str | None:
    """The ffmpeg program, given to matplotlib's FFMpegWriter (``animation.ffmpeg_path``); None if none."""
    program = ffmpeg.ffmpeg_program()
    if program is not None:
        import matplotlib

        matplotlib.rcParams["animation.ffmpeg_path"] = program
    return program


def render(
    path: str | Path, scene: SideBySide, frames: int = 8, fps: float = 20.0, max_seconds: float = 20.0
) -> Path:
    """Write ``scene`` to ``path``: ``.png`` a strip of ``frames`` evenly spaced frames (one row each);
    ``.gif`` / ``.mp4`` an animation at ``fps`` frames per second of take time (at most ``max_seconds``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = check_video_path(path)
    suffix = path.suffix.lower()
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".png":
        picks = np.linspace(0, len(scene) - 1, max(1, frames)).round().astype(int)
        figure = plt.figure(figsize=(7.0, 3.2 * len(picks)))
        sub = figure.subfigures(len(picks), 1) if len(picks) > 1 else [figure]
        for subfigure, k in zip(np.atleast_1d(sub), picks, strict=True):
            scene.draw(subfigure, int(k))
        figure.savefig(path, dpi=80)
        plt.close(figure)
        return path
    from matplotlib import animation

    if suffix == ".mp4" and (_use_ffmpeg() is None or not animation.writers.is_available("ffmpeg")):
        raise ValueError(f"--video {path}: {ffmpeg.MISSING}; write a .gif or .png instead")
    t = scene.times
    wanted = np.arange(t[0], min(t[-1], t[0] + max_seconds) + 1e-9, 1.0 / fps)
    picks = np.searchsorted(t, wanted).clip(0, len(t) - 1)
    figure = plt.figure(figsize=(7.0, 3.5))
    writer = animation.PillowWriter(fps=fps) if suffix == ".gif" else animation.FFMpegWriter(fps=fps)
    with writer.saving(figure, str(path), dpi=80):
        for k in picks:
            scene.draw(figure, int(k))
            writer.grab_frame()
    plt.close(figure)
    return path
