"""Targets of Problem 1 (Rapetti et al. 2020, sec. 2.3) and the measurements that feed them.

A :class:`FrameTarget` says which model frame follows which measured link, whether its position, its
orientation or both are tracked, with what gain (the diagonal blocks of ``K`` in eq. 7) and with what
per-axis weights in the least-squares cost (eq. 10a). :class:`Measurements` stores one sample of the pose
target vector ``x`` and velocity target vector ``v`` of eq. (2) as stacked arrays in the order of the
:class:`TargetSet`, so the solver never loops over targets in Python.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from dynik_ros.core.so3 import determinant, orthonormality_error

Vector3 = tuple[float, float, float]
_IDENTITY = np.eye(3)
_IDENTITY.flags.writeable = False
# flat indices (row-major 3x3) of the positive and the negative products of det R
_LEIBNIZ = np.array([[[0, 4, 8], [1, 5, 6], [2, 3, 7]], [[2, 4, 6], [1, 3, 8], [0, 5, 7]]])


class InvalidMeasurementError(ValueError):
    """A measurement the solver refuses: NaN/inf, wrong shape, or a matrix that is not a rotation."""


@dataclass(frozen=True)
class FrameTarget:
    """One model frame to track.

    ``link`` is the measured link the target follows (the key in a measurement mapping); it defaults to the
    frame name. Gains are in 1/s; weights scale rows of the least-squares cost per axis (world x, y, z).
    """

    frame: str
    link: str | None = None
    position: bool = False
    orientation: bool = True
    position_gain: float = 10.0
    orientation_gain: float = 10.0
    position_weight: Vector3 = (1.0, 1.0, 1.0)
    orientation_weight: Vector3 = (1.0, 1.0, 1.0)

    def __post_init__(self) -> None:
        if not (self.position or self.orientation):
            raise ValueError(f"target '{self.frame}' tracks neither position nor orientation")
        for label in ("position_gain", "orientation_gain"):
            value = getattr(self, label)
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"target '{self.frame}': {label} must be finite and >= 0, got {value}")
        for label in ("position_weight", "orientation_weight"):
            w = np.asarray(getattr(self, label), dtype=float)
            if w.shape != (3,) or not np.all(np.isfinite(w)) or np.any(w < 0):
                raise ValueError(f"target '{self.frame}': {label} must be three finite values >= 0")

    @property
    def source(self) -> str:
        return self.link or self.frame


class TargetSet:
    """An ordered set of targets: ``n_p`` position targets then ``n_o`` orientation targets (eq. 2)."""

    def __init__(self, targets: Sequence[FrameTarget]):
        self.targets = tuple(targets)
        if not self.targets:
            raise ValueError("at least one target is needed")
        frames = [t.frame for t in self.targets]
        duplicated = sorted({f for f in frames if frames.count(f) > 1})
        if duplicated:
            raise ValueError(f"duplicate targets for frames {duplicated}: give one target per frame")
        self.position_targets = tuple(t for t in self.targets if t.position)
        self.orientation_targets = tuple(t for t in self.targets if t.orientation)

    @classmethod
    def of(cls, targets: TargetSet | Sequence[FrameTarget]) -> TargetSet:
        """``targets`` as a :class:`TargetSet` (built from a sequence of :class:`FrameTarget` if needed)."""
        return targets if isinstance(targets, TargetSet) else cls(targets)

    @property
    def n_position(self) -> int:
        return len(self.position_targets)

    @property
    def n_orientation(self) -> int:
        return len(self.orientation_targets)

    @property
    def position_links(self) -> list[str]:
        return [t.source for t in self.position_targets]

    @property
    def orientation_links(self) -> list[str]:
        return [t.source for t in self.orientation_targets]

    def gains(self) -> np.ndarray:
        """Diagonal of ``K`` (eq. 7), one entry per residual row."""
        kp = np.repeat([t.position_gain for t in self.position_targets], 3)
        ko = np.repeat([t.orientation_gain for t in self.orientation_targets], 3)
        return np.concatenate((kp, ko)).astype(float)

    def weights(self) -> np.ndarray:
        """Per-row weights of the cost (eq. 10a)."""
        wp = [t.position_weight for t in self.position_targets]
        wo = [t.orientation_weight for t in self.orientation_targets]
        return np.concatenate((np.ravel(wp) if wp else np.zeros(0), np.ravel(wo) if wo else np.zeros(0)))

    def measurements_from_links(
        self,
        poses: Mapping[str, tuple[np.ndarray, np.ndarray]],
        twists: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> Measurements:
        """Build :class:`Measurements` from per-link ``(position, rotation)`` and ``(linear, angular)``.

        Missing links raise :class:`InvalidMeasurementError` naming them. Without ``twists`` the velocity
        feed-forward is zero (the IK then acts as a pure pose tracker).
        """
        needed = set(self.position_links) | set(self.orientation_links)
        missing = sorted(needed - set(poses))
        if missing:
            raise InvalidMeasurementError(f"measurement lacks links {missing}")
        pos = np.array([poses[k][0] for k in self.position_links], dtype=float).reshape(-1, 3)
        rot = np.array([poses[k][1] for k in self.orientation_links], dtype=float).reshape(-1, 3, 3)
        lin = ang = None
        if twists is not None:
            zero = (np.zeros(3), np.zeros(3))
            lin = np.array([twists.get(k, zero)[0] for k in self.position_links], dtype=float).reshape(-1, 3)
            ang = np.array([twists.get(k, zero)[1] for k in self.orientation_links], dtype=float).reshape(
                -1, 3
            )
        return Measurements(pos, rot, lin, ang)


@dataclass
class Measurements:
    """One sample of targets: positions ``(n_p, 3)``, rotations ``(n_o, 3, 3)`` and their velocities.

    Velocities are world-frame (``I p_dot``, ``I omega``); ``None`` means not measured (zero feed-forward).
    With a balance configuration (:mod:`~dynik_ros.core.com_objective`): ``com_position`` / ``com_velocity``
    the CoM target and its velocity ``(3,)`` (``None``: no CoM row this step) and ``contacts`` one flag per
    support frame (``None``: no foot in contact, no support row).
    """

    positions: np.ndarray
    rotations: np.ndarray
    linear_velocities: np.ndarray | None = None
    angular_velocities: np.ndarray | None = None
    com_position: np.ndarray | None = None
    com_velocity: np.ndarray | None = None
    contacts: np.ndarray | None = None
    stance: np.ndarray | None = None  # one flag per stance frame (core/stance_rows.py); None: none
    # per row of eq. (9) (3 per target: position targets' world x, y, z, then orientation targets'), a factor
    # on its weight for this step (>= 0; None: the weights as configured)
    weight_scale: np.ndarray | None = None
    # per row of eq. (9) (the same order), a lower bound on its gain K this step (1/s, >= 0; None: the gains
    # as configured): Remark 2's variable gain, e.g. a held foot's height (retarget/held_gain.py)
    min_gain: np.ndarray | None = None

    def validate(self, targets: TargetSet, rotation_tolerance: float = 1e-3) -> None:
        """Raise :class:`InvalidMeasurementError` unless shapes match, values are finite and rotations are
        orthonormal with ``|R^T R - I| <= rotation_tolerance`` and ``det R > 0``."""
        if self._plainly_valid(targets, rotation_tolerance):
            return
        expected = {
            "positions": (targets.n_position, 3),
            "rotations": (targets.n_orientation, 3, 3),
            "linear_velocities": (targets.n_position, 3),
            "angular_velocities": (targets.n_orientation, 3),
        }
        if self.com_position is not None or self.com_velocity is not None:
            expected = {**expected, "com_position": (3,), "com_velocity": (3,)}
        for label in ("weight_scale", "min_gain"):  # per row of eq. (9), >= 0
            if getattr(self, label) is None:
                continue
            expected = {**expected, label: (3 * (targets.n_position + targets.n_orientation),)}
            values = np.asarray(getattr(self, label), dtype=float)
            if values.shape == expected[label] and (values < 0.0).any():
                raise InvalidMeasurementError(f"{label} has negative values")
        for label, shape in expected.items():
            value = getattr(self, label)
            if value is None:
                continue
            if np.shape(value) != shape:
                raise InvalidMeasurementError(f"{label} has shape {np.shape(value)}, expected {shape}")
            if not np.isfinite(value).all():
                if label.startswith("com_") or label in ("weight_scale", "min_gain"):
                    raise InvalidMeasurementError(f"{label} not finite")
                bad = np.unique(np.nonzero(~np.isfinite(value))[0])
                links = (
                    targets.position_links
                    if label in ("positions", "linear_velocities")
                    else (targets.orientation_links)
                )
                raise InvalidMeasurementError(f"{label} not finite for links {[links[i] for i in bad]}")
        if targets.n_orientation:
            err = orthonormality_error(self.rotations)
            bad = np.flatnonzero((err > rotation_tolerance) | (determinant(self.rotations) <= 0))
            if bad.size:
                links = [targets.orientation_links[i] for i in bad]
                raise InvalidMeasurementError(
                    f"rotations of {links} are not rotation matrices (|R^T R - I| up to {err.max():.2e}, "
                    f"tolerance {rotation_tolerance:g})"
                )

    def _plainly_valid(self, targets: TargetSet, rotation_tolerance: float) -> bool:
        """The per-step fast path of :meth:`validate`: ``True`` only when every check passes (arrays of the
        expected shapes, all finite, rotations within the tolerance with ``det > 0``); ``False`` sends the
        sample to the full checks, which name what is wrong."""
        n_p, n_o = targets.n_position, targets.n_orientation
        values = (
            self.positions,
            self.rotations,
            self.linear_velocities,
            self.angular_velocities,
            self.com_position,
            self.com_velocity,
            self.weight_scale,
            self.min_gain,
        )
        return _plain_values(values, _field_shapes(n_p, n_o), n_o, rotation_tolerance)


# the fields :meth:`Measurements.validate` checks, in the order of :func:`_field_shapes`
_FIELDS = (
    "positions",
    "rotations",
    "linear_velocities",
    "angular_velocities",
    "com_position",
    "com_velocity",
    "weight_scale",
    "min_gain",
)


def _field_shapes(n_p: int, n_o: int) -> tuple[tuple[int, ...], ...]:
    """The shapes of :data:`_FIELDS` for ``n_p`` position and ``n_o`` orientation targets."""
    rows = (3 * (n_p + n_o),)  # per row of eq. (9)
    return (n_p, 3), (n_o, 3, 3), (n_p, 3), (n_o, 3), (3,), (3,), rows, rows


def _plain_values(
    values: Sequence[np.ndarray | None],
    shapes: Sequence[tuple[int, ...]],
    n_o: int,
    rotation_tolerance: float,
    rotations_check: Callable[[np.ndarray, float], bool] | None = None,
) -> bool:
    """The fast path's checks (:meth:`Measurements._plainly_valid`) of ``values`` in the order of
    :data:`_FIELDS` (``None``: not given), each of its shape in ``shapes``: of one sample, or of many stacked
    (a leading axis of samples, :func:`plainly_valid_all`; every check is per element or per rotation).
    ``rotations_check``: the rotations' test (default :func:`_rotations_plainly_valid`)."""
    for value, shape in zip(values, shapes, strict=True):
        if value is None:
            continue
        if type(value) is not np.ndarray or value.shape != shape or value.dtype.char != "d":
            return False
        # a sum is finite when every term is (NaN and infinities propagate); only an overflowing sum of
        # huge finite values is sent to the full checks, which accept it
        if not math.isfinite(value.sum()):
            return False
    rotations, com_position, com_velocity, weight_scale, min_gain = values[1], *values[4:]
    for per_row in (weight_scale, min_gain):
        if per_row is not None and per_row.size and per_row.min() < 0.0:
            return False
    if (com_position is None) != (com_velocity is None):
        return False
    if not n_o:
        return True
    return (rotations_check or _rotations_plainly_valid)(rotations, rotation_tolerance)


def _rotations_plainly_valid(rotations: np.ndarray, rotation_tolerance: float) -> bool:
    """``|R^T R - I| <= rotation_tolerance`` as the full checks compute it and ``det R > 1/2`` for every
    rotation of ``rotations`` (``(..., 3, 3)``, finite)."""
    gram = np.swapaxes(rotations, -1, -2) @ rotations
    if not np.abs(gram - _IDENTITY).max() <= rotation_tolerance:
        return False
    # det R by its six products (Leibniz), in one gather: above 1/2 (orthonormal: +-1) it leaves no
    # doubt about the sign the full checks compute, anything else goes to them (LAPACK's det, one call,
    # cost 3x as much per step)
    terms = rotations.reshape(-1, 9)[:, _LEIBNIZ].prod(axis=-1).sum(axis=-1)
    return bool((terms[:, 0] - terms[:, 1]).min() > 0.5)


def _stacked_rotations_plainly_valid(rotations: np.ndarray, rotation_tolerance: float) -> bool:
    """:func:`_rotations_plainly_valid` for a whole take's rotations (``(samples, n_o, 3, 3)``, finite),
    each entry of ``R^T R`` and ``det R`` from the nine entries' columns (a few calls on long arrays where the
    stacked matrix product made one 3 x 3 product per rotation: CMU 131_02, 17458 rotations, ~5 -> ~0.5 ms)
    and :data:`_ROUNDING_MARGIN` to spare, since its sums run in another order than the full checks'.
    ``True`` only where the full checks pass; ``False`` decides nothing (the steps then check one by one)."""
    a, b, c, d, e, f, g, h, i = np.ascontiguousarray(rotations.reshape(-1, 9).T)
    limit = rotation_tolerance - _ROUNDING_MARGIN
    worst = 0.0
    for u, v, w, x, y, z, one in (
        (a, d, g, a, d, g, 1.0),  # the columns' squared norms, minus one
        (b, e, h, b, e, h, 1.0),
        (c, f, i, c, f, i, 1.0),
        (a, d, g, b, e, h, 0.0),  # their dot products
        (a, d, g, c, f, i, 0.0),
        (b, e, h, c, f, i, 0.0),
    ):
        entry = u * x + v * y + w * z - one
        worst = max(worst, float(np.maximum.reduce(np.abs(entry))))
        if not worst <= limit:  # (NaN, from infinite products of finite entries, fails too)
            return False
    det = (a * e * i + b * f * g + c * d * h) - (c * e * g + b * d * i + a * f * h)
    return bool(np.minimum.reduce(det) > 0.5 + _ROUNDING_MARGIN)


def plainly_valid_all(
    measurements: Sequence[Measurements], targets: TargetSet, rotation_tolerance: float = 1e-3
) -> bool:
    """Whether :meth:`Measurements.validate` passes every one of ``measurements``, decided for all at once
    by its fast path's checks on each field stacked over the samples (offline, ``Retargeter.run``: the
    steps are then told ``checked``). ``False`` decides nothing (the steps validate one by one, naming what
    is wrong): a field given on some samples and not on others, anything the per-sample fast path sends to
    the full checks, a sum over all the samples that overflows."""
    if not measurements:
        return True
    n_p, n_o = targets.n_position, targets.n_orientation
    shapes = _field_shapes(n_p, n_o)
    stacked: list[np.ndarray | None] = []
    for name, shape in zip(_FIELDS, shapes, strict=True):
        values = [getattr(m, name) for m in measurements]
        given = [v for v in values if v is not None]
        if not given:
            stacked.append(None)
            continue
        if len(given) < len(values) or not all(
            type(v) is np.ndarray and v.shape == shape and v.dtype.char == "d" for v in given
        ):
            return False
        stacked.append(np.concatenate(given).reshape(len(given), *shape))  # np.stack's values, 1/2.5 the cost
    n = len(measurements)
    full_shapes = [(n, *shape) for shape in shapes]
    return _plain_values(stacked, full_shapes, n_o, rotation_tolerance, _stacked_rotations_plainly_valid)


def plainly_valid_rows(
    positions: np.ndarray,
    rotations: np.ndarray,
    linear_velocities: np.ndarray | None,
    angular_velocities: np.ndarray | None,
    rotation_tolerance: float = 1e-3,
) -> bool:
    """The fast path's checks of some rows of a measurement (positions ``(n, 3)``, rotations ``(m, 3, 3)``
    and their velocities): a measurement plainly valid but for these rows, replaced, is plainly valid when
    they are (``RobotAnchoredFeet``: the held feet's rows, every sample of a take). Decided first on the
    few rows' floats (:func:`_few_rows_plainly_valid`), then, unless that passes, by the fast path itself."""
    values = (positions, rotations, linear_velocities, angular_velocities, None, None, None, None)
    if _few_rows_plainly_valid(values[:4], rotation_tolerance):
        return True
    n_p, n_o = len(positions), len(rotations)
    return _plain_values(values, _field_shapes(n_p, n_o), n_o, rotation_tolerance)


# how far inside the rotation tolerance and above det R = 1/2 :func:`_few_rows_plainly_valid` must find a
# rotation: its sums, in another order than numpy's, differ from them by a few units in the last place
# (~1e-15 at |R| ~ 1), so a rotation it passes is one the fast path passes
_ROUNDING_MARGIN = 1e-12


def _few_rows_plainly_valid(values: Sequence[np.ndarray | None], rotation_tolerance: float) -> bool:
    """``True`` only when :func:`_plain_values` passes ``values`` (positions ``(n, 3)``, rotations
    ``(m, 3, 3)``, their velocities or ``None``): float64 arrays of these shapes, finite, every rotation
    with ``|R^T R - I| <= rotation_tolerance`` and ``det R > 1/2`` with :data:`_ROUNDING_MARGIN` to spare,
    checked on Python floats (a few rows: numpy's per-call cost is most of the fast path's there).
    ``False`` decides nothing (the caller then runs the fast path)."""
    positions, rotations, linear, angular = values
    if type(positions) is not np.ndarray or type(rotations) is not np.ndarray:
        return False
    n_p, n_o = len(positions), len(rotations)
    if (
        positions.shape != (n_p, 3)
        or rotations.shape != (n_o, 3, 3)
        or positions.dtype.char != "d"
        or rotations.dtype.char != "d"
    ):
        return False
    # the entries but a rotation's (each is in a column's squared norm below, which an infinite or NaN one
    # fails) summed field by field: finite only when every one is (NaN and infinities propagate; an
    # overflow: the fast path decides). The fields checked one by one: a loop over them cost more
    total = sum(positions.ravel().tolist())
    if linear is not None:
        if type(linear) is not np.ndarray or linear.shape != (n_p, 3) or linear.dtype.char != "d":
            return False
        total += sum(linear.ravel().tolist())
    if angular is not None:
        if type(angular) is not np.ndarray or angular.shape != (n_o, 3) or angular.dtype.char != "d":
            return False
        total += sum(angular.ravel().tolist())
    if not math.isfinite(total):
        return False
    limit = rotation_tolerance - _ROUNDING_MARGIN
    low = -limit
    for a, b, c, d, e, f, g, h, i in rotations.reshape(-1, 9).tolist():
        # R^T R: the columns' squared norms and their dot products, each within the limit (a NaN, from
        # infinite products of finite values, is not); det R by Leibniz (row-major a..i). Compared one by
        # one: a tuple and max over a generator cost more than the rest of the check
        if not (
            low <= a * a + d * d + g * g - 1.0 <= limit
            and low <= b * b + e * e + h * h - 1.0 <= limit
            and low <= c * c + f * f + i * i - 1.0 <= limit
            and low <= a * b + d * e + g * h <= limit
            and low <= a * c + d * f + g * i <= limit
            and low <= b * c + e * f + h * i <= limit
        ):
            return False
        if (
            not (a * e * i + b * f * g + c * d * h) - (c * e * g + b * d * i + a * f * h)
            > 0.5 + _ROUNDING_MARGIN
        ):
            return False
    return True
