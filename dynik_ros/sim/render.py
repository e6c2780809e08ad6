"""PNG strip or video of a simulated run: the robot drawn at instants of a recorded bag (headless).

The bag's ``/joint_states`` and ``/sim/base_pose_true`` (sim_node's outputs) give the robot's state at
each instant; MuJoCo draws the model (collision geometry: the sim drops visuals) with an offscreen
OpenGL context, EGL by default (``MUJOCO_GL``, read when mujoco is imported, so this runs in its own
process: ``python -m dynik_ros.sim.render BAG --robot g1 --out strip.png``). A ``.png`` tiles a few frames
left to right with their time; a ``.gif`` (Pillow) or ``.mp4`` (H.264 through the ``ffmpeg`` program:
:func:`dynik_ros.io.ffmpeg.ffmpeg_program`, refused with a clear message before any work when there is
none) plays the run at ``fps`` frames per second of sim time, the camera following the base.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from dynik_ros.io import ffmpeg


def _states(bag: str | Path) -> list[tuple[float, dict[str, float], np.ndarray, np.ndarray]]:
    """(t, joint positions by name, base position, base quaternion xyzw) per /sim/base_pose_true
    message, joints from the /joint_states of the same stamp."""
    from dynik_ros.io.bags import read_messages

    joints: dict[int, dict[str, float]] = {}
    poses: list[tuple[int, np.ndarray, np.ndarray]] = []
    for m in read_messages(bag, ["/joint_states", "/sim/base_pose_true"]):
        stamp = int(m.msg.header.stamp.sec) * 10**9 + int(m.msg.header.stamp.nanosec)
        if m.topic == "/joint_states":
            joints[stamp] = dict(zip(m.msg.name, np.asarray(m.msg.position, dtype=float), strict=True))
        else:
            p, o = m.msg.pose.position, m.msg.pose.orientation
            poses.append((stamp, np.array([p.x, p.y, p.z]), np.array([o.x, o.y, o.z, o.w])))
    out = [(s * 1e-9, joints[s], p, q) for s, p, q in poses if s in joints]
    if not out:
        raise ValueError(f"{bag}: no /joint_states and /sim/base_pose_true with matching stamps")
    t0 = out[0][0]
    return [(t - t0, j, p, q) for t, j, p, q in out]


VIDEO_SUFFIXES = (".png", ".gif", ".mp4")


def check_video_path(path: str | Path) -> None:
    """ValueError (one line) unless ``path`` is a format this module can write here."""
    suffix = Path(path).suffix.lower()
    if suffix not in VIDEO_SUFFIXES:
        raise ValueError(f"--video {path}: the format comes from the extension: .png (strip), .gif or .mp4")
    if suffix == ".mp4" and ffmpeg.ffmpeg_program() is None:
        raise ValueError(f"--video {path}: {ffmpeg.MISSING}; write a .gif or .png")


def _frames(bag: str | Path, robot: str, indices: Any, width: int, height: int) -> list:
    """PIL images of the robot at ``indices`` of the bag's states, with their time."""
    import mujoco
    from PIL import Image, ImageDraw

    from dynik_ros.sim.simulator import SimConfig, Simulator

    states = _states(bag)
    sim = Simulator.from_robot(robot, SimConfig(base_mode="free"))
    model, data = sim.model, sim.data
    model.vis.global_.offwidth, model.vis.global_.offheight = max(width, 640), max(height, 480)
    free = model.joint("base_free_joint").qposadr[0]
    addr = {n: model.joint(n).qposadr[0] for n in sim.all_joint_names}
    model.vis.headlight.ambient[:] = 0.45
    model.vis.headlight.diffuse[:] = 0.7
    ground = model.geom("ground").id
    model.geom_rgba[:] = (0.75, 0.78, 0.85, 1.0)
    model.geom_rgba[ground] = (0.35, 0.4, 0.35, 1.0)
    renderer = mujoco.Renderer(model, height, width)
    camera = mujoco.MjvCamera()
    camera.distance, camera.azimuth, camera.elevation = 3.0, 120.0, -12.0
    images = []
    for k in indices(len(states), states):
        t, joints, position, quat = states[k]
        data.qpos[free : free + 3] = position
        data.qpos[free + 3 : free + 7] = [quat[3], quat[0], quat[1], quat[2]]
        for name, value in joints.items():
            if name in addr:
                data.qpos[addr[name]] = value
        mujoco.mj_forward(model, data)
        camera.lookat[:] = position - np.array([0.0, 0.0, 0.3])
        renderer.update_scene(data, camera)
        image = Image.fromarray(renderer.render())
        ImageDraw.Draw(image).text((8, 8), f"t = {t:.2f} s", fill=(255, 255, 255))
        images.append(image)
    return images


def render_strip(
    bag: str | Path, robot: str, out: str | Path, frames: int = 6, width: int = 320, height: int = 400
) -> Path:
    """Draw ``frames`` evenly spaced instants of ``bag`` and save them side by side as a PNG."""
    from PIL import Image

    def evenly(n: int, _states: list) -> np.ndarray:
        return np.linspace(0, n - 1, frames).round().astype(int)

    images = _frames(bag, robot, evenly, width, height)
    strip = Image.new("RGB", (width * len(images), height))
    for i, image in enumerate(images):
        strip.paste(image, (i * width, 0))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    strip.save(out)
    return out


def render_video(
    bag: str | Path, robot: str, out: str | Path, fps: float = 20.0, width: int = 480, height: int = 480
) -> Path:
    """The run as a ``.gif`` or ``.mp4`` at ``fps`` frames per second of sim time."""
    check_video_path(out)

    def every_frame(n: int, states: list) -> list[int]:
        times = np.array([s[0] for s in states])
        wanted = np.arange(0.0, times[-1] + 1e-9, 1.0 / fps)
        return sorted(set(np.clip(np.searchsorted(times, wanted), 0, n - 1).tolist()))

    images = _frames(bag, robot, every_frame, width, height)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix.lower() == ".gif":
        images[0].save(out, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
        return out
    return write_mp4(images, out, fps)


def write_mp4(images: list, out: str | Path, fps: float) -> Path:
    """PIL images (one size, even width and height) as an H.264 MP4 (yuv420p) at ``fps``."""
    program = ffmpeg.ffmpeg_program()
    if program is None:
        raise ValueError(f"{out}: {ffmpeg.MISSING}")
    width, height = images[0].size
    command = [
        program, "-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24",
        "-s", f"{width}x{height}", "-r", f"{fps:g}", "-i", "-", "-pix_fmt", "yuv420p", str(out),
    ]  # fmt: skip
    frames = b"".join(np.asarray(image.convert("RGB"), dtype=np.uint8).tobytes() for image in images)
    result = subprocess.run(command, input=frames, capture_output=True)
    if result.returncode != 0:
        raise RuntimeError(f"ffmpeg failed: {result.stderr.decode(errors='replace').strip()[-200:]}")
    return Path(out)


def render_in_subprocess(
    bag: str | Path, robot: str, out: str | Path, frames: int = 6, fps: float = 20.0
) -> Path:
    """:func:`render_strip` in a fresh interpreter with ``MUJOCO_GL`` (default ``egl``) set before mujoco
    is imported; RuntimeError with the child's last lines when it fails."""
    env = dict(os.environ)
    env.setdefault("MUJOCO_GL", "egl")
    check_video_path(out)
    args = [sys.executable, "-m", "dynik_ros.sim.render", str(bag), "--robot", robot, "--out", str(out)]
    args += ["--frames", str(frames), "--fps", f"{fps:g}"]
    result = subprocess.run(args, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"rendering {bag} failed (MUJOCO_GL={env['MUJOCO_GL']}): {' | '.join(tail)}")
    return Path(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="PNG strip, GIF or MP4 of a recorded sim_node run.")
    parser.add_argument("bag", help="bag with /joint_states and /sim/base_pose_true (dynik-ros run g1_sim)")
    parser.add_argument("--robot", default="g1", help="robot name or retargeting YAML (default g1)")
    parser.add_argument("--out", default="sim_strip.png", help=".png (strip), .gif or .mp4 to write")
    parser.add_argument("--frames", type=int, default=6, help="PNG: number of instants (default 6)")
    parser.add_argument("--fps", type=float, default=20.0, help="GIF/MP4: frames per second of sim time")
    args = parser.parse_args(argv)
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        if Path(args.out).suffix.lower() == ".png":
            path = render_strip(args.bag, args.robot, args.out, max(1, args.frames))
        else:
            path = render_video(args.bag, args.robot, args.out, fps=max(0.1, args.fps))
    except (FileNotFoundError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
