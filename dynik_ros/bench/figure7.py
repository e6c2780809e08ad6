"""The comparison of Figure 7 (Rapetti et al. 2020) as a table: models x scenarios x methods.

For every combination we track a synthetic motion (ground truth from forward kinematics) and report step
time statistics, MNTE (eq. 15), angular-velocity RMSE (eq. 16) after the transient, joint-limit
violations, and each method's time as a ratio to the dynamical IK measured in the same run.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from dynik_ros.core.dynamical_ik import DynamicalIK
from dynik_ros.core.instantaneous_ik import PairwiseIK, WholeBodyIK
from dynik_ros.core.metrics import TrackingEvaluator
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.targets import Measurements, TargetSet

METHODS = ("dynamical", "whole-body", "whole-body-nlp", "whole-body-ipopt", "pair-wise")
# method -> the optional module it needs (benchmark-only pip dependencies, not in package.xml)
OPTIONAL_MODULES = {"whole-body-ipopt": "casadi"}


def available_methods() -> list[str]:
    """:data:`METHODS` whose optional dependency is installed (the default set of ``dynik-bench``)."""
    return [m for m in METHODS if m not in OPTIONAL_MODULES or importlib.util.find_spec(OPTIONAL_MODULES[m])]


@dataclass
class Row:
    model: str
    scenario: str
    method: str
    times_ms: np.ndarray
    mnte: float
    rmse: float
    violations: int
    worst_violation: float
    speed_breaches: int = 0  # joint-samples with |s_k - s_{k-1}| / dt above the velocity limit

    @property
    def stats(self) -> dict[str, float]:
        t = self.times_ms
        return {"mean": t.mean(), "p50": np.percentile(t, 50), "p99": np.percentile(t, 99), "max": t.max()}


def make_solver(method: str, robot: RobotModel, targets: TargetSet, q0: np.ndarray):
    """A solver for ``method``; instantaneous ones use the paper's warm start from the previous sample."""
    if method == "dynamical":
        return DynamicalIK(robot, targets, q0=q0)
    if method == "whole-body":
        return WholeBodyIK(robot, targets, tolerance=1e-4, max_iterations=30, q0=q0)
    if method == "whole-body-nlp":
        from dynik_ros.bench.nlp_ik import NlpWholeBodyIK

        return NlpWholeBodyIK(robot, targets, q0=q0)
    if method == "whole-body-ipopt":
        try:
            from dynik_ros.bench.ipopt_ik import IpoptWholeBodyIK
        except ModuleNotFoundError as error:
            raise ModuleNotFoundError(
                f"method 'whole-body-ipopt' needs casadi ({error}); pip install -r requirements.txt"
            ) from error
        return IpoptWholeBodyIK(robot, targets, tolerance=1e-4, max_iterations=30, q0=q0)
    if method == "pair-wise":
        return PairwiseIK(robot, targets, tolerance=1e-4, max_iterations=30, q0=q0)
    raise ValueError(f"unknown method '{method}', expected one of {METHODS}")


def run_case(
    model_name: str,
    scenario: str,
    robot: RobotModel,
    targets: TargetSet,
    measurements: Sequence[Measurements],
    times: np.ndarray,
    method: str,
    q0: np.ndarray,
    transient: float = 2.0,
) -> Row:
    """Track ``measurements`` (sampled at ``times``, uniform) with ``method``: the row of the table."""
    solver = make_solver(method, robot, targets, q0)
    evaluator = TrackingEvaluator(robot, targets)
    dt = float(times[1] - times[0])
    step_times, mntes, rmses = [], [], []
    violations, worst, breaches = 0, 0.0, 0
    offset = 7 if robot.floating_base else 0
    previous = np.asarray(q0, dtype=float)[offset:]
    for k, m in enumerate(measurements):
        start = time.perf_counter()
        q, v = solver.step(m, dt)
        step_times.append(time.perf_counter() - start)
        s = q[offset:]
        breaches += int(np.sum(np.abs(s - previous) / dt > robot.velocity_limit * (1 + 1e-9)))
        previous = s
        excess = np.maximum(s - robot.upper, robot.lower - s).max()
        if excess > 1e-6:
            violations += 1
            worst = max(worst, float(excess))
        if times[k] - times[0] >= transient:
            err = evaluator.evaluate(q, v, m)
            mntes.append(err.mnte)
            rmses.append(err.angular_velocity_rmse)
    return Row(
        model_name,
        scenario,
        method,
        np.array(step_times[1:]) * 1e3,  # the first step includes one-off warm-up
        float(np.mean(mntes)),
        float(np.mean(rmses)),
        violations,
        worst,
        breaches,
    )


def format_table(rows: Sequence[Row]) -> str:
    """Plain-text table; the ratio columns divide by the dynamical IK of the same model and scenario.
    ``viol``: output samples outside a position limit; ``speed``: joint-samples whose finite-difference
    speed ``|s_k - s_{k-1}| / dt`` exceeds the velocity limit (the output trajectory, not ``nu``)."""
    reference = {(r.model, r.scenario): r for r in rows if r.method == "dynamical"}
    header = (
        f"{'model':<9}{'scenario':<9}{'method':<17}{'mean ms':>8}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}"
        f"{'MNTE':>10}{'RMSE':>9}{'viol':>6}{'speed':>6}{'x mean':>8}{'x p99':>8}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        s = r.stats
        ref = reference.get((r.model, r.scenario))
        ratio_mean = s["mean"] / ref.stats["mean"] if ref else float("nan")
        ratio_p99 = s["p99"] / ref.stats["p99"] if ref else float("nan")
        lines.append(
            f"{r.model:<9}{r.scenario:<9}{r.method:<17}{s['mean']:>8.3f}{s['p50']:>8.3f}{s['p99']:>8.3f}"
            f"{s['max']:>8.2f}{r.mnte:>10.2e}{r.rmse:>9.2e}{r.violations:>6d}{r.speed_breaches:>6d}{ratio_mean:>8.1f}{ratio_p99:>8.1f}"
        )
    return "\n".join(lines)


def resident_kib() -> float:
    """Resident set size of this process (KiB), from /proc (0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except OSError:
        return 0.0
    import os

    return pages * os.sysconf("SC_PAGE_SIZE") / 1024.0


def steady_memory(step: Callable[[], None], steps: int, warmup: int = 2000) -> tuple[float, float]:
    """Resident memory (KiB) after ``warmup`` steps and after ``steps`` more: growth means a leak (Python or
    native, e.g. in OSQP or pinocchio)."""
    for _ in range(warmup):
        step()
    first = resident_kib()
    for _ in range(steps):
        step()
    return first, resident_kib()
