"""Cost per step of the second seed's objectives (``dynik-bench --objectives``): the same retargeted G1 walk
tracked by the plain step and by steps with each extra objective on, interleaved sample by sample in one run
so that a loaded machine slows every variant alike (the ratio is what to read). Each step is timed in CPU
time of the calling thread (``time.thread_time``: BLAS is single-threaded, see ``dynik_ros/__init__``), far
less sensitive to the machine's load than wall-clock time; the p50 and the mean are both reported, and the
steps that also ran the branch-recovery shadow (``core/branch_recovery.py``: a second IK step while a
trial runs) are counted."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dynik_ros.core.com_objective import BalanceConfig, SupportFrame
from dynik_ros.core.dynamical_ik import DynamicalIK, DynamicalIKConfig
from dynik_ros.core.regularizers import RegularizerConfig
from dynik_ros.core.targets import Measurements

# G1 soles: heel and toe of config/g1.yaml, 6 cm wide
G1_SOLE = ((-0.05, 0.03, -0.035), (0.12, 0.03, -0.035), (0.12, -0.03, -0.035), (-0.05, -0.03, -0.035))
G1_FEET = ("left_ankle_roll_link", "right_ankle_roll_link")


Extend = Callable[[Measurements, np.ndarray], Measurements]


def objective_variants() -> dict[str, tuple[DynamicalIKConfig, Extend]]:
    """Name -> (config, how a sample and its contact flags become the step's input)."""
    support = tuple(SupportFrame(f, G1_SOLE) for f in G1_FEET)

    def plain(m: Measurements, flags: np.ndarray) -> Measurements:
        return m

    def with_com(m: Measurements, flags: np.ndarray, contacts: bool = False) -> Measurements:
        feet = m.positions[-2:]  # the G1 map's last two position targets are the feet
        centre = feet[flags >= 0].mean(axis=0) if np.any(flags >= 0) else feet.mean(axis=0)
        return Measurements(
            m.positions,
            m.rotations,
            m.linear_velocities,
            m.angular_velocities,
            com_position=np.array([centre[0], centre[1], 0.6]),
            com_velocity=np.zeros(3),
            contacts=flags >= 0 if contacts else None,
        )

    def with_support(m: Measurements, flags: np.ndarray) -> Measurements:
        return with_com(m, flags, contacts=True)

    return {
        "plain": (DynamicalIKConfig(), plain),
        "com": (DynamicalIKConfig(balance=BalanceConfig(enabled=True, com_weight=(1.0, 1.0, 0.0))), with_com),
        "com+support": (
            DynamicalIKConfig(
                balance=BalanceConfig(
                    enabled=True, com_weight=(1.0, 1.0, 0.0), support=support, hard_support=True, margin=0.0
                )
            ),
            with_support,
        ),
        "com+regularizers": (
            DynamicalIKConfig(
                balance=BalanceConfig(enabled=True, com_weight=(1.0, 1.0, 0.0)),
                regularizers=RegularizerConfig(0.01, velocity_weight=1.0, velocity_threshold=4.0),
            ),
            with_com,
        ),
        "state regularizer": (DynamicalIKConfig(regularizers=RegularizerConfig(state_weight=0.01)), plain),
        "velocity regularizer": (
            DynamicalIKConfig(regularizers=RegularizerConfig(velocity_weight=1.0, velocity_threshold=4.0)),
            plain,
        ),
        "all of them": (
            DynamicalIKConfig(
                balance=BalanceConfig(
                    enabled=True, com_weight=(1.0, 1.0, 0.0), support=support, hard_support=True, margin=0.0
                ),
                regularizers=RegularizerConfig(0.01, velocity_weight=1.0, velocity_threshold=4.0),
            ),
            with_support,
        ),
    }


@dataclass(frozen=True)
class StepCost:
    """CPU time per step of one variant over all repeats: p50 and mean [us] and their ratios to the plain
    step; the same two ratios of every repeat alone (each repeat replays the walk from the start, all
    variants interleaved, so a repeat's ratios compare steps run at the same moments); how many steps also
    stepped the branch-recovery shadow."""

    name: str
    p50: float
    mean: float
    p50_ratio: float
    mean_ratio: float
    shadow_steps: int
    steps: int
    p50_ratios: tuple[float, ...] = ()
    mean_ratios: tuple[float, ...] = ()


def cost_rows(times: dict[str, list[list[float]]], shadow: dict[str, int]) -> list[StepCost]:
    """:class:`StepCost` of every variant from its step times per repeat (seconds; ``"plain"`` the base)."""
    base = times["plain"]
    rows = []
    for name, runs in times.items():
        pooled = np.concatenate(runs)
        plain = np.concatenate(base)
        rows.append(
            StepCost(
                name,
                1e6 * float(np.median(pooled)),
                1e6 * float(np.mean(pooled)),
                float(np.median(pooled) / np.median(plain)),
                float(np.mean(pooled) / np.mean(plain)),
                shadow[name],
                len(pooled),
                tuple(float(np.median(t) / np.median(b)) for t, b in zip(runs, base, strict=True)),
                tuple(float(np.mean(t) / np.mean(b)) for t, b in zip(runs, base, strict=True)),
            )
        )
    return rows


def step_costs(duration: float = 4.0, rate: float = 240.0, repeats: int = 1) -> list[StepCost]:
    """CPU time per step of every variant on the synthetic walk retargeted to G1 at ``rate`` Hz (the
    retargeter's targets and foot contacts), variants interleaved sample by sample, the walk replayed
    ``repeats`` times (each solver reset to the start)."""
    from dynik_ros.retarget.human import synthetic_human_motion
    from dynik_ros.retarget.retargeter import Retargeter

    retargeter = Retargeter.from_config("g1")
    human = retargeter.config.human
    motion = synthetic_human_motion("walking", duration, rate, height=human.height, mass=human.mass)
    measurements, flags = retargeter.motion_measurements(motion)
    robot, targets, q0 = retargeter.robot, retargeter.targets, retargeter.initial_configuration()
    variants = objective_variants()
    solvers = {name: DynamicalIK(robot, targets, config, q0) for name, (config, _) in variants.items()}
    samples = {
        name: [extend(m, f) for m, f in zip(measurements, flags, strict=True)]
        for name, (_, extend) in variants.items()
    }
    times: dict[str, list[list[float]]] = {name: [] for name in variants}
    shadow = dict.fromkeys(variants, 0)
    dt = 1.0 / rate
    clock = time.thread_time
    for _ in range(repeats):
        for name, ik in solvers.items():
            ik.reset(q0)
            times[name].append([])
        for k in range(len(measurements)):
            for name, ik in solvers.items():
                running = ik.recovery.state != ik.recovery.IDLE
                start = clock()
                ik.step(samples[name][k], dt)
                times[name][-1].append(clock() - start)
                shadow[name] += running or ik.recovery.state != ik.recovery.IDLE
    return cost_rows(times, shadow)


def singularity_table(weight: float = 1.0, threshold: float = 4.0) -> str:
    """The Boxer-style case (:mod:`.singularity`) without and with the velocity regularizer."""
    from dynik_ros.bench.singularity import format_singularity, run_singularity

    plain = run_singularity(None)
    regularized = run_singularity(RegularizerConfig(velocity_weight=weight, velocity_threshold=threshold))
    ratio = plain.peak_speed / max(regularized.peak_speed, 1e-12)
    far = ~plain.near
    growth = regularized.error[far].mean() / max(plain.error[far].mean(), 1e-12)
    return (
        format_singularity(plain, regularized, weight, threshold)
        + f"\n  peak speed / {ratio:.1f} (target >= 10), error elsewhere x {growth:.3f} (target <= 1.1)"
    )


def format_costs(rows: list[StepCost]) -> str:
    """The table; with several repeats each ratio also gets its range over the repeats."""
    ranged = any(len(r.p50_ratios) > 1 for r in rows)

    def ratio(pooled: float, each: tuple[float, ...]) -> str:
        return f"{pooled:5.2f} ({min(each):.2f}-{max(each):.2f})" if ranged else f"{pooled:8.2f}"

    width = 17 if ranged else 8
    lines = [
        f"  {'variant':<22} {'p50 [us]':>9} {'x plain':>{width}} {'mean [us]':>10} {'x plain':>{width}}"
        f" {'shadow steps':>13}"
    ]
    lines += [
        f"  {r.name:<22} {r.p50:9.0f} {ratio(r.p50_ratio, r.p50_ratios):>{width}} {r.mean:10.0f} "
        f"{ratio(r.mean_ratio, r.mean_ratios):>{width}} {r.shadow_steps:6d} / {r.steps}"
        for r in rows
    ]
    if ranged:
        repeats = len(rows[0].p50_ratios)
        lines.append(
            f"  (x plain: the {repeats} repeats pooled, then the lowest-highest of each repeat alone)"
        )
    return "\n".join(lines)


def target_line(rows: list[StepCost], name: str = "com+regularizers", target: float = 1.3) -> str:
    """Issue 12's step-time target (CoM + both regularizers <= 1.3x the plain step), p50 and mean."""
    row = next(r for r in rows if r.name == name)
    verdicts = []
    for label, pooled, each in (
        ("p50", row.p50_ratio, row.p50_ratios),
        ("mean", row.mean_ratio, row.mean_ratios),
    ):
        met = sum(x <= target for x in each)
        verdicts.append(f"{label} {pooled:.2f}x ({met} of {len(each)} repeats <= {target}x)")
    return f"  target {name} <= {target}x plain: " + ", ".join(verdicts)
