"""Every frame placement ``oMf`` of a pinocchio ``Data`` read as one numpy table, without a call per frame.

Reading a frame's pose through pinocchio's Python bindings (``data.oMf[i].homogeneous``) crosses into C++
twice and builds two objects: ~1-3 us a frame, i.e. 20-50 us a step for the 17 targets of a humanoid,
more than pinocchio's whole forward kinematics (2-6 us). ``data.oMf`` is one contiguous array of ``SE3``
(a column-major 3x3 rotation, then the translation: 12 doubles a frame), and the bindings hand out numpy
views of its members, so the whole vector can be viewed as an ``(n_frames, 12)`` array once and read with
one gather a step. The layout is checked against the bindings' own accessors when the first table is made
(at two configurations; every table's frame addresses too); where it does not hold, :func:`placement_table`
returns ``None`` and callers read the frames one by one as before. The view does not keep ``data`` alive:
its owner must (``data.oMf`` is never reallocated after ``model.createData()``). ROS-free.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

_DOUBLES = 12  # a placement: rotation (column-major) then translation
ROTATION_ROW_MAJOR = np.array([0, 3, 6, 1, 4, 7, 2, 5, 8])  # column-major storage -> row-major order
TRANSLATION = np.arange(9, 12)


def placement_table(model: pin.Model, data: pin.Data) -> np.ndarray | None:
    """``(model.nframes, 12)`` view of ``data.oMf`` (per frame: rotation column by column, translation), valid
    after any ``updateFramePlacements``; ``None`` if pinocchio's memory layout is not the expected one.
    Leaves ``data`` at the neutral configuration's frame placements. The values are checked on the first
    table a process makes (:data:`_LAYOUT`): what they check, the order of a placement's doubles, belongs to
    pinocchio's build, not to a model (every table after it: ~2 ms each for G1's 79 frames, four tables a
    ``dynik-retarget`` run); where each frame sits is checked for every ``data`` (:func:`placement_view`)."""
    table = placement_view(model, data)
    if table is None or not _layout_matches(model, data, table):
        return None
    pin.framesForwardKinematics(model, data, pin.neutral(model))
    return table


_LAYOUT: list[bool] = []  # the values check's verdict, once made


def _layout_matches(model: pin.Model, data: pin.Data, table: np.ndarray) -> bool:
    """Whether ``table`` holds every frame's rotation (column by column) and translation as the bindings'
    own accessors give them, at two configurations; decided on the first table and kept."""
    if not _LAYOUT:
        _LAYOUT.append(_values_match(model, data, table))
    return _LAYOUT[0]


def _values_match(model: pin.Model, data: pin.Data, table: np.ndarray) -> bool:
    for q in (pin.neutral(model), _random_configuration(model)):
        pin.framesForwardKinematics(model, data, q)
        for i in range(model.nframes):
            expected = np.concatenate((data.oMf[i].rotation.reshape(-1, order="F"), data.oMf[i].translation))
            if not np.array_equal(table[i], expected):
                return False
    return True


def placement_view(model: pin.Model, data: pin.Data) -> np.ndarray | None:
    """The view of :func:`placement_table` where every frame's rotation and translation are at the addresses
    and strides the layout puts them (``None`` otherwise), without its check of the values at two
    configurations: ``data`` is left as it is (for a ``data`` that holds a step's placements already)."""
    n = model.nframes
    first = data.oMf[0].rotation
    if first.dtype != np.float64 or first.strides != (8, 24) or data.oMf[0].translation.strides != (8,):
        return None
    start = first.__array_interface__["data"][0]
    for i in range(n):  # every frame where the layout puts it
        if data.oMf[i].rotation.__array_interface__["data"][0] != start + 8 * _DOUBLES * i:
            return None
        if data.oMf[i].translation.__array_interface__["data"][0] != start + 8 * (_DOUBLES * i + 9):
            return None
    table = np.lib.stride_tricks.as_strided(first, shape=(n, _DOUBLES), strides=(8 * _DOUBLES, 8))
    table.flags.writeable = False
    return table


def flat_view(table: np.ndarray | None) -> np.ndarray | None:
    """``table`` (:func:`placement_table`, :func:`placement_view`) as one flat view, to read with one array of
    flat indices (``np.ravel_multi_index`` of :func:`pose_indices`): a gather by one index array costs ~0.4
    us where one by rows and columns costs ~1.8 us. ``None`` where it is not one contiguous block (then
    read it by rows and columns)."""
    if table is None or not table.flags.c_contiguous:
        return None
    flat = table.reshape(-1)
    return flat if np.shares_memory(flat, table) else None


def pose_indices(frame_ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, columns)`` such that ``table[rows, columns]`` (one gather) is ``(len(frame_ids), 12)``: per
    frame its rotation in row-major order (entries 0-8), then its translation (9-11)."""
    rows = np.repeat(np.asarray(frame_ids, dtype=np.intp), _DOUBLES).reshape(-1, _DOUBLES)
    columns = np.tile(np.concatenate((ROTATION_ROW_MAJOR, TRANSLATION)), (len(frame_ids), 1))
    return rows, columns


def _random_configuration(model: pin.Model) -> np.ndarray:
    """A random configuration within the limits cut to +-1 (a free flyer's are +-1e308)."""
    lower = np.clip(np.nan_to_num(model.lowerPositionLimit), -1.0, 1.0)
    upper = np.clip(np.nan_to_num(model.upperPositionLimit), -1.0, 1.0)
    return pin.randomConfiguration(model, np.minimum(lower, upper), np.maximum(lower, upper))
