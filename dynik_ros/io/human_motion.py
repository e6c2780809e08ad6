"""Human motion in memory and in ``.npz`` motion files (ROS-free).

:class:`HumanMotion` is what every motion reader returns (``.npz`` here, MVNX in :mod:`dynik_ros.io.mvnx`,
BVH in :mod:`dynik_ros.io.bvh`, rosbag2 in ``dynik-retarget``): world poses (Z-up, metres) and world twists
of named human links with their stamps. ``.npz`` layout: ``times (N,)``, ``links (L,)``, ``positions
(N, L, 3)``, ``rotations (N, L, 3, 3)`` or ``quaternions (N, L, 4, x y z w)``, optional
``linear_velocities`` and ``angular_velocities (N, L, 3)`` (missing ones are finite-differenced).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

Pose = tuple[np.ndarray, np.ndarray]


@dataclass
class HumanMotion:
    """Human link trajectories (world frame) with their stamps; velocities may be finite differences."""

    name: str
    times: np.ndarray  # (N,) seconds, the input stamps
    links: list[str]
    positions: np.ndarray  # (N, L, 3)
    rotations: np.ndarray  # (N, L, 3, 3)
    linear_velocities: np.ndarray  # (N, L, 3)
    angular_velocities: np.ndarray  # (N, L, 3)
    source: str = ""
    stamp_origin_ns: int = 0  # input stamp of t = 0, integer nanoseconds (exact epoch stamps)
    calibration: dict[str, dict[str, Pose]] = field(default_factory=dict)  # the file's calibration frames
    notices: list[str] = field(default_factory=list)  # what a reader derived or changed (one line each)

    def __len__(self) -> int:
        return len(self.times)

    def sample(self, k: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return {name: (self.positions[k, i], self.rotations[k, i]) for i, name in enumerate(self.links)}


def finite_difference_twists(
    times: np.ndarray, positions: np.ndarray, rotations: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """World linear and angular velocities ``(N, L, 3)`` by central differences (one-sided at the ends);
    angular velocity from ``log(R_{k+1} R_{k-1}^T) / (t_{k+1} - t_{k-1})`` (:func:`_angular_difference`)."""
    if len(times) < 2:
        return np.zeros_like(positions), np.zeros_like(positions)
    return np.gradient(positions, times, axis=0), _angular_difference(times, positions, rotations)


def _angular_difference(times: np.ndarray, positions: np.ndarray, rotations: np.ndarray) -> np.ndarray:
    """The angular velocities of :func:`finite_difference_twists` ``(N, L, 3)``, at least two samples."""
    from dynik_ros.io.rotation_vectors import rotation_vectors

    n = len(times)
    after = np.r_[np.arange(1, n), n - 1]
    before = np.r_[0, np.arange(0, n - 1)]
    dt = (times[after] - times[before])[:, None, None]
    # R[after] @ R[before]^T with the middle rows on views of the take, not two gathered copies of it (the
    # views of a C-ordered take, as the copies are, so numpy hands each product to BLAS the same way)
    rotations = np.ascontiguousarray(rotations, dtype=float)
    relative = np.empty(rotations.shape)
    np.matmul(rotations[2:], np.swapaxes(rotations[:-2], -1, -2), out=relative[1:-1])
    for k in (0, n - 1):
        relative[k] = rotations[after[k]] @ np.swapaxes(rotations[before[k]], -1, -2)
    rotvec = rotation_vectors(relative.reshape(-1, 3, 3)).reshape(positions.shape)  # (scipy's, bit for bit)
    return rotvec / dt


def read_npz_motion(path: str | Path) -> HumanMotion:
    """A motion file (see the module docstring)."""
    from dynik_ros.core.quaternion import rotation_from_quaternion

    with np.load(path, allow_pickle=False) as data:
        keys = set(data.files)
        for key in ("times", "links", "positions"):
            if key not in keys:
                raise ValueError(f"motion file '{path}' lacks '{key}' (has {sorted(keys)})")
        times = np.asarray(data["times"], dtype=float)
        links = [str(x) for x in data["links"]]
        positions = np.asarray(data["positions"], dtype=float)
        if "rotations" in keys:
            rotations = np.asarray(data["rotations"], dtype=float)
        elif "quaternions" in keys:
            rotations = rotation_from_quaternion(np.asarray(data["quaternions"], dtype=float))
        else:
            raise ValueError(f"motion file '{path}' has neither 'rotations' nor 'quaternions'")
        n, n_links = len(times), len(links)
        if positions.shape != (n, n_links, 3) or rotations.shape != (n, n_links, 3, 3):
            raise ValueError(
                f"motion file '{path}': positions {positions.shape} / rotations {rotations.shape} do not "
                f"match {n} times and {n_links} links"
            )
        measured = "linear_velocities" in keys and "angular_velocities" in keys
        if measured:
            linear = np.asarray(data["linear_velocities"], dtype=float)
            angular = np.asarray(data["angular_velocities"], dtype=float)
        else:
            linear = angular = np.zeros_like(positions)
    motion = HumanMotion(Path(path).stem, times, links, positions, rotations, linear, angular, f"npz {path}")
    return _ordered(motion, differentiate=not measured)


def save_npz_motion(motion: Any, path: str | Path) -> Path:
    """Write a motion (``times``, ``links``, ``positions``, ``rotations``, velocities) as a motion file."""
    path = Path(path)
    np.savez_compressed(
        path,
        times=np.asarray(motion.times, dtype=float),
        links=np.array(list(motion.links)),
        positions=np.asarray(motion.positions),
        rotations=np.asarray(motion.rotations),
        linear_velocities=np.asarray(motion.linear_velocities),
        angular_velocities=np.asarray(motion.angular_velocities),
    )
    return path


def _rate_and_stamps(motion: HumanMotion, rate: float) -> tuple[float, np.ndarray]:
    """``rate`` as a float (``ValueError`` unless positive and finite) and the take's stamps."""
    rate = float(rate)
    if not (math.isfinite(rate) and rate > 0.0):
        raise ValueError(f"rate must be positive and finite, got {rate}")
    return rate, np.asarray(motion.times, dtype=float)


DIVISOR_TOLERANCE = 0.01  # at_rate: how near an integer the take's rate over the asked one must be


def resampled(motion: HumanMotion, rate: float) -> HumanMotion:
    """``motion`` on a uniform grid of ``rate`` Hz from its first stamp to its last: positions and velocities
    linear between the two samples around each new stamp, rotations along the geodesic between them
    (``R_k exp(s log(R_k^T R_k+1))``). E.g. a take played slower (:func:`time_scaled`) brought back to its
    capture rate, so the IK steps as often as before."""
    rate, times = _rate_and_stamps(motion, rate)
    if len(times) < 2:
        return motion
    from dataclasses import replace

    import pinocchio as pin

    stamps = times[0] + np.arange(int(np.floor((times[-1] - times[0]) * rate + 1e-9)) + 1) / rate
    k = np.clip(np.searchsorted(times, stamps, side="right") - 1, 0, len(times) - 2)
    s = np.clip((stamps - times[k]) / (times[k + 1] - times[k]), 0.0, 1.0)

    def linear(values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=float)
        return (1.0 - s)[:, None, None] * values[k] + s[:, None, None] * values[k + 1]

    given = np.asarray(motion.rotations, dtype=float)
    before, after = given[k], given[k + 1]
    rotations = np.empty_like(before)
    for i in range(len(stamps)):
        for j in range(before.shape[1]):
            step = pin.log3(before[i, j].T @ after[i, j])
            rotations[i, j] = before[i, j] @ pin.exp3(s[i] * step)
    return replace(
        motion,
        times=stamps,
        positions=linear(motion.positions),
        rotations=rotations,
        linear_velocities=linear(motion.linear_velocities),
        angular_velocities=linear(motion.angular_velocities),
        source=f"{motion.source}, resampled at {rate:g} Hz",
        notices=list(motion.notices),
    )


def at_rate(motion: HumanMotion, rate: float) -> HumanMotion:
    """``motion`` stepped at ``rate`` Hz: every ``n``-th sample as captured where the take's mean rate is
    ``n`` times ``rate`` to within ``DIVISOR_TOLERANCE`` of a sample (a 120 Hz take at 60 Hz: every second
    sample; BVH frame times are rounded, so the stamps are not an exact grid), else :func:`resampled`."""
    rate, times = _rate_and_stamps(motion, rate)
    if len(times) < 2:
        return motion
    ratio = (len(times) - 1) / float(times[-1] - times[0]) / rate
    every = round(ratio)
    if every < 1 or abs(ratio - every) > DIVISOR_TOLERANCE:
        return resampled(motion, rate)
    if every == 1:
        return motion
    from dataclasses import replace

    return replace(
        motion,
        times=times[::every],
        positions=np.asarray(motion.positions)[::every],
        rotations=np.asarray(motion.rotations)[::every],
        linear_velocities=np.asarray(motion.linear_velocities)[::every],
        angular_velocities=np.asarray(motion.angular_velocities)[::every],
        source=f"{motion.source}, one sample in {every} ({rate:g} Hz)",
        notices=list(motion.notices),
    )


def time_scaled(motion: HumanMotion, factor: float) -> HumanMotion:
    """``motion`` played ``factor`` times slower (``factor`` > 1) or faster (< 1): sample times multiplied by
    ``factor`` (about the epoch, so ``stamp_origin_ns`` still stamps t = 0), velocities divided by it; poses
    and calibration frames unchanged."""
    factor = float(factor)
    if not (math.isfinite(factor) and factor > 0.0):
        raise ValueError(f"time scale must be positive and finite, got {factor}")
    if factor == 1.0:
        return motion
    from dataclasses import replace

    return replace(
        motion,
        times=np.asarray(motion.times, dtype=float) * factor,
        linear_velocities=np.asarray(motion.linear_velocities, dtype=float) / factor,
        angular_velocities=np.asarray(motion.angular_velocities, dtype=float) / factor,
        source=f"{motion.source}, played {factor:g}x slower"
        if factor > 1
        else f"{motion.source}, played {1 / factor:g}x faster",
        notices=list(motion.notices),
    )


def _ordered(motion: HumanMotion, differentiate: bool = False) -> HumanMotion:
    """Samples sorted by stamp, repeated stamps dropped (a warning on stderr); with ``differentiate``
    the velocities are then computed by :func:`finite_difference_twists`."""
    order = np.argsort(motion.times, kind="stable")
    times = motion.times[order]
    keep = np.r_[True, np.diff(times) > 0]
    if not keep.all():
        print(f"dynik-retarget: dropped {int((~keep).sum())} samples with repeated stamps", file=sys.stderr)
    index = order[keep]
    times, positions, rotations = motion.times[index], motion.positions[index], motion.rotations[index]
    if differentiate:
        linear, angular = finite_difference_twists(times, positions, rotations)
    else:
        linear, angular = motion.linear_velocities[index], motion.angular_velocities[index]
    return HumanMotion(
        motion.name,
        times,
        motion.links,
        positions,
        rotations,
        linear,
        angular,
        motion.source,
        motion.stamp_origin_ns,
        motion.calibration,
        motion.notices,
    )


SAVGOL_CHUNK = 256  # windows :func:`savgol` filters at a time


def savgol(values: np.ndarray, length: int, order: int, deriv: int = 0, delta: float = 1.0) -> np.ndarray:
    """Savitzky-Golay filter along axis 0: the ``deriv``-th derivative of the degree-``order`` polynomial
    fitted by least squares to each ``length``-sample window (odd), evaluated at the window's centre; the
    first and last half windows use the polynomial of the first / last full window."""
    values = np.asarray(values, dtype=float)
    n, half = len(values), length // 2
    x = np.arange(length) - half
    vander = np.vander(x, order + 1, increasing=True)  # (length, order+1)
    fit = np.linalg.pinv(vander)  # (order+1, length): polynomial coefficients from the window
    scale = math.factorial(deriv) / delta**deriv
    flat = values.reshape(n, -1)
    windows = np.lib.stride_tricks.sliding_window_view(flat, length, axis=0)  # (n-length+1, F, length)
    out = np.empty_like(flat)
    # (scale * windows) @ fit[deriv], SAVGOL_CHUNK windows at a time: the same products window by window, in a
    # scaled copy of a few MB, not one of the whole take (100 MB on 60 s at 120 Hz, most of the filter's cost)
    inner = out[half : n - half]
    for start in range(0, len(windows), SAVGOL_CHUNK):
        inner[start : start + SAVGOL_CHUNK] = scale * windows[start : start + SAVGOL_CHUNK] @ fit[deriv]
    # edges: derivative of the end windows' polynomials at the edge samples
    for block, positions, rows in ((flat[:length], x[:half], slice(0, half)),
                                   (flat[-length:], x[length - half:], slice(n - half, n))):  # fmt: skip
        coef = fit @ block  # (order+1, F)
        basis = np.zeros((len(positions), order + 1))
        for k in range(deriv, order + 1):
            falling = math.factorial(k) / math.factorial(k - deriv)
            basis[:, k] = falling * positions.astype(float) ** (k - deriv)
        out[rows] = basis @ coef / delta**deriv
    return out.reshape(values.shape)


def smoothed_twists(
    times: np.ndarray, positions: np.ndarray, rotations: np.ndarray, window: float = 0.2
) -> tuple[np.ndarray, np.ndarray]:
    """World linear and angular velocities ``(N, L, 3)``: Savitzky-Golay (cubic) derivative of the
    positions; ``log(R_{k+1} R_{k-1}^T) / (t_{k+1} - t_{k-1})`` smoothed by the same window."""
    n = len(times)
    dt = float(np.median(np.diff(times))) if n > 1 else 1.0
    length = max(5, int(round(window / dt)) | 1)
    if n < length:
        return finite_difference_twists(times, positions, rotations)
    # (the differences' angular velocities only: the linear ones come from the filter)
    linear = savgol(positions, length, 3, deriv=1, delta=dt)
    angular = savgol(_angular_difference(times, positions, rotations), length, 3)
    return linear, angular
