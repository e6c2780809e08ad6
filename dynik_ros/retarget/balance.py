"""Quasi-static balance for retargeted motions (``dynik-retarget --balance``; core rows in
:mod:`dynik_ros.core.com_objective`).

The seed's walker (Schumacher et al. 2021, sec. V-4): "in the single-support phase of the gait, we ask for
the CoM to lie within the support of that foot, and in the dual-support phase we ask the CoM to move along
a line connecting the two feet". Offline, the whole contact sequence of the retargeter's foot-contact
detection (:class:`~dynik_ros.retarget.foot_contact.FootContact`) is known, so:

* the **support** of sample ``k`` is the feet in contact from ``k`` to ``k + lookahead``: a foot about to
  lift no longer counts, so the CoM is over the stance foot before lift-off (when no foot stays, the feet
  in contact now: the detection leaves gaps without contact between single supports on fast walks);
* the **CoM target** (horizontal; no vertical row) is the centre of the stance foot's sole in single
  support; across a double support it moves on the line from the last stance foot to the next over the
  last ``shift_time`` seconds of the phase (the whole phase if shorter); with no stance foot before or
  after, the middle of the feet stands in (after the last single support the CoM moves there over the
  first ``shift_time`` seconds of the final phase, so a take that ends standing ends at rest over the
  middle, not moving off the last stance foot in its last 0.3 s). Its velocity feed-forward is the plan's
  time derivative.

The sole polygon of a foot is its map's sole points (heel, toe) widened by ``sole_half_width`` across the
foot. While balancing, the root's position target weighs ``root_weight_scale`` times the map's and the
upper body's targets ``upper_weight_scale`` times (measured on the G1 walk: with the map's weights the
torso leaned back by up to 12 deg to keep the CoM over the stance foot while the human's pelvis moved on;
upper-body MNTE 3.1e-3; with 0.1 and 5: 4.3e-6, the legs and the pelvis position take it up).
:func:`support_figures` checks the written trajectory: the CoM of every output ``q`` against the
polygon of the feet in contact at that ``q`` (the detection's flags, not the look-ahead).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pinocchio as pin

from dynik_ros.core.com_objective import BalanceConfig, SupportFrame, convex_hull, support_distance
from dynik_ros.core.dynamical_ik import DynamicalIKConfig
from dynik_ros.core.regularizers import RegularizerConfig
from dynik_ros.core.sole import sole_polygon
from dynik_ros.core.targets import Measurements, TargetSet

BALANCE_KEYS = (
    "enabled",
    "com_weight",
    "com_gain",
    "hard_support",
    "margin",
    "sole_half_width",
    "lookahead",
    "shift_time",
    "recovery_gain",
    "root_weight_scale",
    "upper_weight_scale",
    "plan",
    "com_height",
    "zmp_passes",
)
PLANS = ("quasi_static", "zmp")
REGULARIZER_KEYS = ("state_weight", "velocity_weight", "velocity_threshold")


@dataclass(frozen=True)
class BalanceSpec:
    """The ``balance:`` section of a retargeting map (all lengths in metres, times in seconds)."""

    enabled: bool = False
    com_weight: float = 40.0  # horizontal CoM rows (no vertical)
    com_gain: float = 10.0
    hard_support: bool = True
    margin: float = 0.015  # the polygon the IK keeps the CoM in (the check asks for 0.01)
    sole_half_width: float = 0.03
    lookahead: float = 0.1
    shift_time: float = 0.3
    recovery_gain: float = 10.0
    root_weight_scale: float = 0.1
    upper_weight_scale: float = 5.0
    plan: str = "quasi_static"  # or "zmp": the dynamic plan of retarget/zmp_plan.py (no hard support rows)
    zmp_passes: int = 1  # 2: re-plan once against the first output's whole-body ZMP (zmp_balance.py)
    com_height: float = 0.0  # the ZMP plan's cart-table height above the ground [m]; 0: the start pose's

    def __post_init__(self) -> None:
        if self.plan not in PLANS:
            raise ValueError(f"balance.plan must be one of {', '.join(PLANS)}, got {self.plan!r}")
        if self.zmp_passes != int(self.zmp_passes) or self.zmp_passes < 1:
            raise ValueError(f"balance.zmp_passes must be an integer >= 1, got {self.zmp_passes}")
        object.__setattr__(self, "zmp_passes", int(self.zmp_passes))


def balance_from_dict(reader, node) -> BalanceSpec:
    """The ``balance:`` section, validated by the map reader (``retarget/config.py``'s ``_Reader``)."""
    node = reader.mapping(node or {}, "balance", optional=BALANCE_KEYS)
    values = {}
    for key in BALANCE_KEYS:
        if key not in node:
            continue
        if key in ("enabled", "hard_support"):
            values[key] = reader.boolean(node[key], f"balance.{key}")
        elif key == "zmp_passes":
            value = reader.number(node[key], "balance.zmp_passes", minimum=1.0)
            if value != int(value):
                raise reader.error("balance.zmp_passes", f"must be an integer, got {value}")
            values[key] = int(value)
        elif key == "plan":
            values[key] = reader.string(node[key], "balance.plan")
            if values[key] not in PLANS:
                raise reader.error("balance.plan", f"must be one of {', '.join(PLANS)}")
        else:
            values[key] = reader.number(node[key], f"balance.{key}", minimum=0.0)
    return BalanceSpec(**values)


def regularizers_from_dict(reader, node) -> RegularizerConfig:
    """The ``regularizers:`` section (:class:`~dynik_ros.core.regularizers.RegularizerConfig`)."""
    node = reader.mapping(node or {}, "regularizers", optional=REGULARIZER_KEYS)
    return RegularizerConfig(
        **{k: reader.number(node[k], f"regularizers.{k}", minimum=0.0) for k in REGULARIZER_KEYS if k in node}
    )


def sections_to_dict(balance: BalanceSpec, regularizers: RegularizerConfig) -> dict:
    """The YAML form of both sections (for ``RetargetConfig.to_dict``)."""
    return {
        "balance": {k: getattr(balance, k) for k in BALANCE_KEYS},
        "regularizers": {k: getattr(regularizers, k) for k in REGULARIZER_KEYS},
    }


def support_frames(feet, half_width: float) -> tuple[SupportFrame, ...]:
    """:class:`SupportFrame` of each foot of a map (``FootSpec``: frame and sole points)."""
    return tuple(SupportFrame(f.frame, sole_polygon(f.sole, half_width)) for f in feet)


def ik_config(spec: BalanceSpec, feet, base: DynamicalIKConfig | None = None) -> DynamicalIKConfig:
    """``base`` (default config) with the balance rows of ``spec`` for the map's ``feet``."""
    balance = BalanceConfig(
        enabled=True,
        com_weight=(spec.com_weight, spec.com_weight, 0.0),
        com_gain=spec.com_gain,
        support=support_frames(feet, spec.sole_half_width),
        hard_support=spec.hard_support and spec.plan != "zmp",  # the ZMP plan's CoM may leave the support
        margin=spec.margin,
        recovery_gain=spec.recovery_gain,
    )
    config = replace(base or DynamicalIKConfig(), balance=balance)
    if spec.plan == "zmp":  # no support rows to switch to Euler, and Adams chatters (zmp_balance.py)
        config = replace(config, integration="euler")
    return config


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``[start, end)`` of every run of True in ``mask``."""
    edges = np.diff(np.concatenate(([0], mask.astype(int), [0])))
    return list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist(), strict=True))


def plan(
    times: np.ndarray, flags: np.ndarray, centres: np.ndarray, spec: BalanceSpec
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(support (N, n_feet) bool, com target (N, 3), com velocity (N, 3))`` from the detection's flags
    ``(N, n_feet)`` (-1: no contact) and each foot's sole centre ``(N, n_feet, 3)`` (module docstring)."""
    n, n_feet = flags.shape
    contact = flags >= 0
    dt = float(np.median(np.diff(times))) if n > 1 else 0.01
    ahead = max(0, int(round(spec.lookahead / dt)))
    support = contact.copy()
    for k in range(1, ahead + 1):  # in contact now and for the next `ahead` samples
        support[: n - k] &= contact[k:]
    none_stays = ~support.any(axis=1)
    support[none_stays] = contact[none_stays]
    target = np.full((n, 2), np.nan)
    single = support.sum(axis=1) == 1
    if single.any():
        foot = support[single].argmax(axis=1)
        target[single] = centres[single, foot, :2]
    middle = centres[:, :, :2].mean(axis=1)
    for a, b in _runs(~single):
        before = target[a - 1] if a > 0 else middle[a]
        after = target[b] if b < n else middle[b - 1]
        shift = int(round(spec.shift_time / dt))
        if b < n:  # towards the next stance foot: over the last shift_time before it lifts the other
            start, end = max(a, b - shift), b - 1
        else:  # no stance foot after (the take ends standing): to the middle as the phase begins
            start, end = a, min(b - 1, a + shift)
        t0, t1 = times[start], times[end] if end > start else times[start] + dt
        alpha = np.clip((times[a:b] - t0) / max(t1 - t0, 1e-9), 0.0, 1.0)
        target[a:b] = before + alpha[:, None] * (after - before)
    com = np.zeros((n, 3))
    com[:, :2] = target
    velocity = np.zeros((n, 3))
    if n > 1:
        velocity[:, :2] = np.gradient(target, times, axis=0)
    return support, com, velocity


class BalancedTargets:
    """Adds the CoM target and the look-ahead support to a retargeter's measurements."""

    def __init__(self, retargeter, spec: BalanceSpec):
        self.retargeter = retargeter
        self.spec = spec
        feet = retargeter.config.feet
        self._sole_centres = [np.mean(sole_polygon(f.sole, 0.0), axis=0) for f in feet]
        self._rows = list(retargeter.contact.rows)
        ori = {t.frame: i for i, t in enumerate(retargeter.targets.orientation_targets)}
        self._ori_rows = [ori.get(f.frame) for f in feet]
        self.zmp_plan = None  # the ZmpPlan of the last apply() with plan: zmp

    def centres(self, measurements: Sequence[Measurements]) -> np.ndarray:
        """World sole centre of each foot target ``(N, n_feet, 3)``."""
        out = np.zeros((len(measurements), len(self._rows), 3))
        for k, m in enumerate(measurements):
            for f, (row, ori) in enumerate(zip(self._rows, self._ori_rows, strict=True)):
                rotation = m.rotations[ori] if ori is not None else np.eye(3)
                out[k, f] = m.positions[row] + rotation @ self._sole_centres[f]
        return out

    def apply(
        self, times: np.ndarray, measurements: Sequence[Measurements], flags: np.ndarray
    ) -> list[Measurements]:
        support, com, velocity = plan(np.asarray(times, float), flags, self.centres(measurements), self.spec)
        if self.spec.plan == "zmp":  # the quasi-static targets become the dynamic plan's references
            from dynik_ros.retarget.zmp_balance import dynamic_targets

            com, velocity, self.zmp_plan = dynamic_targets(self, times, measurements, flags, com, support)
        return [
            replace(m, com_position=com[k], com_velocity=velocity[k], contacts=support[k])
            for k, m in enumerate(measurements)
        ]


@dataclass
class SupportFigures:
    distance: np.ndarray  # (N,) CoM distance inside the polygon of the feet in contact [m]; NaN: no foot
    com: np.ndarray  # (N, 3) CoM of the output
    hulls: list  # per sample the polygon (m, 2) or None

    def fraction_inside(self, margin: float = 0.01) -> float:
        valid = np.isfinite(self.distance)
        return float(np.mean(self.distance[valid] >= margin)) if valid.any() else float("nan")


def support_figures(robot, q: np.ndarray, flags: np.ndarray, feet, half_width: float) -> SupportFigures:
    """CoM of every output ``q`` against the polygon of the feet in contact (``flags >= 0``) at that ``q``."""
    data = robot.model.createData()
    frames = [robot.frame_id(f.frame) for f in feet]
    soles = [np.array(sole_polygon(f.sole, half_width)) for f in feet]
    n = len(q)
    distance = np.full(n, np.nan)
    com = np.zeros((n, 3))
    hulls: list = [None] * n
    for k in range(n):
        com[k] = pin.centerOfMass(robot.model, data, q[k])
        pin.updateFramePlacements(robot.model, data)
        on = [f for f in range(len(feet)) if flags[k, f] >= 0]
        if not on:
            continue
        corners = np.concatenate(
            [soles[f] @ data.oMf[frames[f]].rotation.T + data.oMf[frames[f]].translation for f in on]
        )
        hulls[k] = convex_hull(corners[:, :2])
        distance[k] = support_distance(com[k], hulls[k])
    return SupportFigures(distance, com, hulls)


def is_upper_body(link: str, root: str) -> bool:
    """A human link above the pelvis (not the root, a leg, a foot or a toe)."""
    return link != root and not any(part in link for part in ("Leg", "Foot", "Toe"))


def weighted_targets(targets: TargetSet, spec: BalanceSpec, root: str) -> TargetSet:
    """``targets`` with the root's position weight and the upper body's weights scaled (module docstring)."""
    out = []
    for t in targets.targets:
        if t.source == root:
            t = replace(t, position_weight=tuple(spec.root_weight_scale * w for w in t.position_weight))
        elif is_upper_body(t.source, root):
            scale = spec.upper_weight_scale
            t = replace(
                t,
                position_weight=tuple(scale * w for w in t.position_weight),
                orientation_weight=tuple(scale * w for w in t.orientation_weight),
            )
        out.append(t)
    return TargetSet(out)


def upper_body_mnte(targets: TargetSet, orientation_error: np.ndarray, root: str) -> float:
    """Eq. (15) over the upper body's orientation targets: mean of ``1 - cos(angle error)``."""
    upper = [i for i, t in enumerate(targets.orientation_targets) if is_upper_body(t.source, root)]
    return float(np.mean(1.0 - np.cos(orientation_error[:, upper]))) if upper else float("nan")


def plot_support(path: Path, runs: dict[str, SupportFigures], title: str) -> Path | None:
    """PNG of the CoM ground tracks of ``runs`` against the support polygons of the first run."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(11, 4.5))
    first = next(iter(runs.values()))
    seen: set = set()
    for hull in first.hulls:
        if hull is None:
            continue
        key = tuple(np.round(hull, 3).ravel())
        if key in seen:
            continue
        seen.add(key)
        closed = np.vstack((hull, hull[:1]))
        ax.plot(closed[:, 0], closed[:, 1], color="0.75", linewidth=0.6)
    for (name, figures), colour in zip(runs.items(), ("tab:blue", "tab:red", "tab:green"), strict=False):
        inside = figures.fraction_inside()
        ax.plot(figures.com[:, 0], figures.com[:, 1], color=colour, linewidth=1.0,
                label=f"{name}: {100 * inside:.1f} % of samples >= 1 cm inside")  # fmt: skip
    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    stretched = (y1 - y0) < 0.25 * (x1 - x0)  # a long walk: equal axes would leave a flat line
    if not stretched:
        ax.set_aspect("equal")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m] (stretched)" if stretched else "y [m]")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


@dataclass
class BalanceComparison:
    """One motion retargeted without and with the balance rows (:func:`compare`)."""

    robot: str
    motion: str
    samples: int
    no_contact: int  # samples without a foot in contact (not counted in the fractions)
    inside: dict  # run -> fraction of contact samples with the CoM >= 1 cm inside
    min_distance: dict  # run -> smallest distance inside [m] (negative: outside)
    upper_mnte: dict  # run -> eq. (15) over the upper body
    held: int  # balanced steps that took the solver's failure path
    figures: dict  # run -> SupportFigures


def compare(retargeter, motion, settle: float = 1.0, label: str = "motion") -> BalanceComparison:
    """Retarget ``motion`` with the map as it is and with its balance section switched on."""
    spec = replace(retargeter.config.balance, enabled=True)
    plain_config = replace(retargeter.config, balance=replace(spec, enabled=False))
    retargeter.config = plain_config
    retargeter.reset()
    measurements, flags = retargeter.motion_measurements(motion)
    results = {"plain": retargeter.run(motion.times, measurements, settle=settle, contacts=flags)}
    retargeter.config = replace(plain_config, balance=spec)
    balanced = retargeter.balanced(motion.times, measurements, flags)
    results["balanced"] = retargeter.run(motion.times, balanced, settle=settle, contacts=flags)
    feet, root = retargeter.config.feet, retargeter.config.root.link
    figures = {
        name: support_figures(retargeter.robot, r.q, flags, feet, spec.sole_half_width)
        for name, r in results.items()
    }
    return BalanceComparison(
        robot=retargeter.config.name,
        motion=label,
        samples=len(motion.times),
        no_contact=int((flags < 0).all(axis=1).sum()),
        inside={k: f.fraction_inside(0.01) for k, f in figures.items()},
        min_distance={k: float(np.nanmin(f.distance)) for k, f in figures.items()},
        upper_mnte={
            k: upper_body_mnte(retargeter.targets, r.orientation_error, root) for k, r in results.items()
        },
        held=int((~results["balanced"].solved).sum()),
        figures=figures,
    )


def format_comparisons(rows: Sequence[BalanceComparison]) -> str:
    head = (
        f"  {'robot':<6} {'motion':<26} {'samples':>7} {'no foot':>7} {'inside >= 1 cm':>15} "
        f"{'min dist [mm]':>14} {'upper MNTE':>19} {'held':>4}"
    )
    lines = [head, f"  {'':<50} {'plain / balanced':>15} {'plain / balanced':>14} {'plain / balanced':>19}"]
    for r in rows:
        lines.append(
            f"  {r.robot:<6} {r.motion[:26]:<26} {r.samples:>7} {r.no_contact:>7} "
            f"{100 * r.inside['plain']:5.1f} / {100 * r.inside['balanced']:5.1f} % "
            f"{1e3 * r.min_distance['plain']:6.1f} / {1e3 * r.min_distance['balanced']:5.1f} "
            f"{r.upper_mnte['plain']:8.1e} / {r.upper_mnte['balanced']:8.1e} {r.held:>4}"
        )
    return "\n".join(lines)


def balance_report(retargeter, result, plot_path: Path | None) -> tuple[str, Path | None]:
    """The summary line of a balanced run and its CoM track plot (``None``: not written)."""
    spec = retargeter.config.balance
    figures = support_figures(
        retargeter.robot, result.q, result.contacts, retargeter.config.feet, spec.sole_half_width
    )
    valid = np.isfinite(figures.distance)
    upper = upper_body_mnte(retargeter.targets, result.orientation_error, retargeter.config.root.link)
    line = (
        f"balance: CoM >= 1 cm inside the support on {100 * figures.fraction_inside(0.01):.1f} % of the "
        f"{int(valid.sum())} samples with a foot in contact (min {1e3 * np.nanmin(figures.distance):.1f} mm; "
        f"{int((~valid).sum())} without contact); upper-body MNTE {upper:.2e}"
        if valid.any()
        else "balance: no sample with a foot in contact"
    )
    if spec.plan == "zmp":
        from dynik_ros.retarget.zmp_balance import plan_note
        from dynik_ros.retarget.zmp_figures import zmp_figures

        zmp = zmp_figures(
            retargeter.robot, result.times, result.q, result.contacts, retargeter.config.feet,
            spec.sole_half_width, retargeter.contact.robot_ground,
        )  # fmt: skip
        line += (
            f"\nzmp: whole-body ZMP >= 1 cm inside the support on {100 * zmp.fraction_inside(0.01):.1f} % "
            f"of the {zmp.counted} samples with a foot in contact "
            f"(median {1e3 * np.nanmedian(zmp.distance):.1f} mm){plan_note(retargeter.zmp_plan, spec.margin)}"
        )
    plot = None
    if plot_path is not None:
        plot = plot_support(plot_path, {"balanced": figures}, f"{retargeter.config.name}: CoM ground track")
    return line, plot
