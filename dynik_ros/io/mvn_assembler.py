"""Merging MVN datagrams into samples (:class:`SampleAssembler`): one sample counter and character per
sample, late, duplicate, overtaken and inconsistent datagrams dropped with counts, sender restarts
detected. See :mod:`dynik_ros.io.xsens_stream` for the overview."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dynik_ros.io.mvn_protocol import (
    ANGULAR,
    DATAGRAM_SETS,
    LINEAR,
    POSE,
    SEGMENT_NAMES,
    SUPPORTED_TYPES,
    Datagram,
    StreamUnits,
    _rotations,
)


# --------------------------------------------------------------------------- assembling samples
@dataclass
class XsensSample:
    """One complete sample of one character, SI units, world frame (MVN's Z-up frame)."""

    character_id: int
    sample_counter: int
    time_code: int  # ms, MVN's relative clock
    received_ns: int  # receiver clock when the completing datagram arrived
    segment_ids: np.ndarray  # (L,) ascending
    names: list[str]
    positions: np.ndarray  # (L, 3) m
    quaternions: np.ndarray  # (L, 4) unit, xyzw
    linear_velocities: np.ndarray | None  # (L, 3) m/s, world
    angular_velocities: np.ndarray | None  # (L, 3) rad/s, world


ASSEMBLER_COUNTS = (
    "datagrams",
    "samples",
    "ignored_type",
    "other_character",
    "late",
    "duplicate",
    "incomplete",
    "inconsistent",
    "restarts",
)
"""Counters of :class:`SampleAssembler`: datagrams offered, complete samples out, then what was dropped:
a type not used (01, 12, 13, 25, ... or one outside the chosen set), another character, a datagram of a
sample older than the last complete one (out of order), a datagram seen twice, a sample overtaken by a newer
complete one (its datagrams were lost or reordered), a sample whose datagram types disagree (segment sets,
or 02 vs 21/22 pose beyond the tolerance); ``restarts``: the sample counter jumped back (MVN restarted)."""


@dataclass
class _Pending:
    parts: dict[str, dict[int, Datagram]] = field(default_factory=dict)
    last_index: dict[str, int] = field(default_factory=dict)

    def complete(self, required: Sequence[str]) -> bool:
        for kind in required:
            last = self.last_index.get(kind)
            parts = self.parts.get(kind)
            if last is None or parts is None or len(parts) != last + 1 or max(parts) != last:
                return False
        return True


@dataclass
class _Character:
    last: int | None = None  # sample counter of the last complete sample
    pending: dict[int, _Pending] = field(default_factory=dict)
    behind: list[int] = field(default_factory=list)  # consecutive counters seen well behind ``last``


def _newer(a: int, b: int) -> bool:
    """Sample counter ``a`` comes after ``b`` (uint32 serial-number arithmetic, so wrap-around is fine)."""
    d = (a - b) & 0xFFFFFFFF
    return 0 < d < 0x80000000


class SampleAssembler:
    """Merges the datagrams of one sample (same sample counter and character id) into :class:`XsensSample`.

    A sample is complete once every type of ``required`` has all its datagrams (0 .. the one flagged last).
    It is emitted at once; pending older samples are then dropped (``incomplete``), and later datagrams of
    older samples are dropped (``late``): output sample counters strictly increase. ``max_pending`` bounds
    the samples waiting for datagrams. A counter more than ``restart_gap`` behind the last complete one is
    taken as a restart of the sender, not as a late datagram. Closer behind, but more than ``max_pending``
    (further than any late datagram of the live stream can be), it is a restart once ``confirm_restart``
    consecutive counters, each within ``max_pending`` after the previous, confirm a stream there: an MVN
    restart (counter back to 0) or a stray sample from another sender that moved the counter ahead costs
    ``confirm_restart - 1`` samples, not the ``restart_gap`` samples it took before to get past it.

    ``tolerance`` (metres; ``None`` disables): when type 02 comes with 21 / 22, their positions must agree
    within it and their orientations within the same number in radians; otherwise the sample is
    ``inconsistent`` (a Network Streamer set to Y-up for type 02, or mixed units).
    """

    def __init__(
        self,
        required: Sequence[str] = DATAGRAM_SETS["02+21+22"],
        units: StreamUnits | None = None,
        character: int | None = 0,
        max_pending: int = 8,
        restart_gap: int = 1000,
        tolerance: float | None = 0.01,
        confirm_restart: int = 3,
    ):
        required = tuple(dict.fromkeys(required))
        if not required or any(kind not in SUPPORTED_TYPES for kind in required):
            raise ValueError(f"required message types must be among {list(SUPPORTED_TYPES)}, got {required}")
        if POSE not in required and not {LINEAR, ANGULAR} <= set(required):
            raise ValueError("a pose needs type 02, or both 21 (position) and 22 (orientation)")
        self.required = required
        self.units = units or StreamUnits()
        self.character = character
        self.max_pending = max(1, int(max_pending))
        self.restart_gap = int(restart_gap)
        self.confirm_restart = max(1, int(confirm_restart))
        self.tolerance = tolerance
        self.counts = dict.fromkeys(ASSEMBLER_COUNTS, 0)
        self.last_drop = ""
        self._characters: dict[int, _Character] = {}

    def reset(self) -> None:
        """Forget pending samples and the last counter (counts are kept)."""
        self._characters.clear()

    def _restart_confirmed(self, state: _Character, counter: int) -> bool:
        """Record ``counter`` (well behind the last sample); true once ``confirm_restart`` consecutive
        counters (each within ``max_pending`` after the previous) make a stream there."""
        seen = state.behind
        if seen and counter != seen[-1]:
            step = (counter - seen[-1]) & 0xFFFFFFFF
            if not 0 < step <= self.max_pending:
                seen.clear()
        if not seen or counter != seen[-1]:
            seen.append(counter)
        return len(seen) >= self.confirm_restart

    def _drop(self, reason: str, detail: str, n: int = 1) -> None:
        self.counts[reason] += n
        self.last_drop = f"{reason}: {detail}"

    def add(self, datagram: Datagram, received_ns: int = 0) -> list[XsensSample]:
        """Offer one datagram; the samples it completes (zero or one)."""
        self.counts["datagrams"] += 1
        kind = datagram.message_type
        if not datagram.supported or kind not in self.required:
            self.counts["ignored_type"] += 1
            return []
        if self.character is not None and datagram.character_id != self.character:
            self._drop("other_character", f"character {datagram.character_id}, following {self.character}")
            return []
        state = self._characters.setdefault(datagram.character_id, _Character())
        counter = datagram.sample_counter
        if state.last is not None and not _newer(counter, state.last):
            behind = (state.last - counter) & 0xFFFFFFFF
            if behind > self.restart_gap or (
                behind > self.max_pending and self._restart_confirmed(state, counter)
            ):
                self.counts["restarts"] += 1
                if state.pending:
                    self._drop("incomplete", "sender restarted", len(state.pending))
                state.last, state.pending, state.behind = None, {}, []
            else:
                self._drop("late", f"sample {counter} after sample {state.last} was complete")
                return []
        elif state.behind:
            state.behind.clear()
        pending = state.pending.get(counter)
        if pending is None:
            if len(state.pending) >= self.max_pending:
                oldest = next(
                    (c for c in state.pending if not any(_newer(c, o) for o in state.pending)),
                    next(iter(state.pending)),
                )
                del state.pending[oldest]
                self._drop("incomplete", f"sample {oldest} still pending after {self.max_pending} newer ones")
            pending = state.pending[counter] = _Pending()
        parts = pending.parts.setdefault(kind, {})
        index = datagram.datagram_index
        if index in parts or (kind in pending.last_index and index > pending.last_index[kind]):
            self._drop("duplicate", f"type {kind} datagram {index} of sample {counter} seen twice")
            return []
        if datagram.last:
            if index < max(parts, default=-1):
                self._drop("duplicate", f"type {kind} datagram {index} flagged last after a later one")
                return []
            pending.last_index[kind] = index
        parts[index] = datagram
        if not pending.complete(self.required):
            return []
        del state.pending[counter]
        older = [c for c in state.pending if _newer(counter, c)]
        for c in older:
            del state.pending[c]
        if older:
            self._drop("incomplete", f"samples {sorted(older)} overtaken by sample {counter}", len(older))
        state.last = counter
        try:
            sample = self._merge(pending, received_ns)
        except ValueError as exc:
            self._drop("inconsistent", f"sample {counter}: {exc}")
            return []
        self.counts["samples"] += 1
        return [sample]

    def _merge(self, pending: _Pending, received_ns: int) -> XsensSample:
        merged: dict[str, dict[str, np.ndarray]] = {}
        first: Datagram | None = None
        for kind in self.required:
            dgrams = [pending.parts[kind][i] for i in range(pending.last_index[kind] + 1)]
            first = first or dgrams[0]
            names = ("positions", "quaternions", "linear_velocities", "angular_velocities")
            if len(dgrams) == 1:  # the usual case: one datagram per type
                ids = dgrams[0].segment_ids
                arrays = {name: getattr(dgrams[0], name) for name in names}
            else:
                ids = np.concatenate([d.segment_ids for d in dgrams])
                if len(set(ids.tolist())) != len(ids):
                    raise ValueError(f"type {kind}: a segment id appears in two datagrams")
                arrays = {
                    name: None
                    if getattr(dgrams[0], name) is None
                    else np.concatenate([getattr(d, name) for d in dgrams])
                    for name in names
                }
            if np.any(ids[1:] < ids[:-1]):  # MVN sends ascending ids; sort otherwise
                order = np.argsort(ids, kind="stable")
                ids = ids[order]
                arrays = {name: None if a is None else a[order] for name, a in arrays.items()}
            arrays["ids"] = ids
            merged[kind] = arrays
        ids = merged[self.required[0]]["ids"]
        for kind in self.required[1:]:
            if not np.array_equal(merged[kind]["ids"], ids):
                raise ValueError(f"types {self.required[0]} and {kind} carry different segments")
        if len(ids) == 0:
            raise ValueError("no body segment")
        scale = self.units.metres_per_unit
        pose = merged.get(POSE)
        positions = (merged[LINEAR] if pose is None else pose)["positions"] * scale
        quaternions = (merged[ANGULAR] if pose is None else pose)["quaternions"]
        if pose is not None and self.tolerance is not None:
            if LINEAR in merged:
                gap = float(np.max(np.abs(merged[LINEAR]["positions"] * scale - positions)))
                if gap > self.tolerance:
                    raise ValueError(f"type 02 and 21 positions differ by {gap:.3g} m")
            if ANGULAR in merged:
                dots = np.abs(np.einsum("ij,ij->i", merged[ANGULAR]["quaternions"], quaternions))
                angle = float(2.0 * np.arccos(np.clip(dots.min(), 0.0, 1.0)))
                if angle > self.tolerance:
                    raise ValueError(f"type 02 and 22 orientations differ by {angle:.3g} rad")
        linear = angular = None
        if LINEAR in merged and ANGULAR in merged:
            linear = merged[LINEAR]["linear_velocities"] * scale
            angular = merged[ANGULAR]["angular_velocities"] * self.units.radians_per_unit
            if self.units.angular_velocity_frame == "segment":
                angular = np.einsum("lij,lj->li", _rotations(merged[ANGULAR]["quaternions"]), angular)
        assert first is not None
        return XsensSample(
            character_id=first.character_id,
            sample_counter=first.sample_counter,
            time_code=first.time_code,
            received_ns=received_ns,
            segment_ids=ids,
            names=[SEGMENT_NAMES[i - 1] for i in ids.tolist()],
            positions=positions,
            quaternions=quaternions,
            linear_velocities=linear,
            angular_velocities=angular,
        )
