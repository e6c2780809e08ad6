"""A live stream's samples into targets, one sample at a time, with the IK steps of a sparse stream.

:meth:`Retargeter.measurements <StreamInput.measurements>` turns one sample of the human links into the
robot's targets (the contact rules carry their state from the previous call). Offline, a take whose samples
are further apart than ``max_step`` (0.02 s) is stepped on a finer grid whose human links are interpolated
between the samples, with the contact rules run on every step (:mod:`.ik_steps`): a touch-down's 0.1 s
levelling blend is three samples of a 30 Hz take, and one IK step a sample lagged behind it (measured with
ik_node's path on the synthetic walk at 30 Hz on G1: flat tilt 1.9 -> 4.2 deg, 0.9 -> 6.0 mm under the
floor, README *Live sparse streams*).

:meth:`StreamInput.stream_measurements` gives a stream the same steps causally: when a sample comes more
than ``max_step`` after the previous one (and at most ``max_gap``: a longer gap is a lost stretch of the
stream, not a sparse one), the human links are interpolated between the two samples on the grid
``t_prev + j dt / m`` (:func:`.ik_steps.on_ik_steps`), every step's targets are computed in order, the
last one being this sample's; the toe-off noise estimate reads the samples only. The targets are those the
offline run computes for the same grid (tested against :meth:`Retargeter.step_measurements`); nothing waits
for a later sample.

The start: the offline run steps once on the first sample, with its step grid's first interval
(:func:`.ik_steps.first_step_dt`), after an optional settle (:meth:`Retargeter.settle`). A stream knows that
interval at its second sample: :func:`stream_path` (ik_node's path without ROS, ``IKNode._process`` with ROS)
answers the first sample with the state before its step and takes that step when the second sample comes,
before the second sample's steps, so from there on the path is ``Retargeter.retarget_motion``'s.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from dynik_ros.core.targets import InvalidMeasurementError, Measurements
from dynik_ros.retarget.ik_steps import on_ik_steps

Pose = tuple[np.ndarray, np.ndarray]
Twist = tuple[np.ndarray, np.ndarray]


class StreamInput:
    """Sample-by-sample input of :class:`~dynik_ros.retarget.retargeter.Retargeter` (module docstring).
    Its state (``_clock``, ``_previous``: the last sample's time and arrays) is reset by ``reset`` and
    saved by ``save_state`` of the retargeter."""

    _clock: float
    _previous: tuple | None

    def _sample_arrays(
        self, poses: Mapping[str, Pose], twists: Mapping[str, Twist] | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """``(p (1, L, 3), R (1, L, 3, 3), v, w)`` of one sample in the order of ``links``."""
        missing = [k for k in self.links if k not in poses]
        if missing:
            raise InvalidMeasurementError(f"measurement lacks human links {missing}")
        p = np.array([poses[k][0] for k in self.links], dtype=float)[None]
        r = np.array([poses[k][1] for k in self.links], dtype=float)[None]
        v = w = None
        if twists:
            zero = (np.zeros(3), np.zeros(3))
            v = np.array([twists.get(k, zero)[0] for k in self.links], dtype=float)[None]
            w = np.array([twists.get(k, zero)[1] for k in self.links], dtype=float)[None]
        return p, r, v, w

    @property
    def last_sample_time(self) -> float | None:
        """Time (s) of the last sample given to :meth:`measurements` / :meth:`stream_measurements`."""
        return None if self._previous is None else self._previous[0]

    def _sample_time(self, time: float | None) -> float:
        if time is None:
            time = self._clock
            self._clock += 0.01
        else:
            self._clock = float(time)
        return float(time)

    def measurements(
        self,
        poses: Mapping[str, Pose],
        twists: Mapping[str, Twist] | None = None,
        time: float | None = None,
        robot_q: np.ndarray | None = None,
    ) -> Measurements:
        """Targets for one sample: ``poses`` ``{link: (p, R)}`` and ``twists`` ``{link: (v, w)}`` in the
        world frame (Xsens link names). ``time`` (s) times the contact release; default: 100 Hz steps.
        ``robot_q``: the IK's configuration now (with ``contact.anchor: robot`` a foot turning flat in
        contact is held where the robot's sole is, :mod:`.robot_anchor`; ``None``: where the human's is)."""
        arrays = self._sample_arrays(poses, twists)
        time = self._sample_time(time)
        out, flags = self.compute(np.array([time]), *arrays, robot_q=robot_q, replay=False)
        self.last_contacts = flags[0]  # this sample's foot contact (index of the sole point, -1: none)
        self._previous = (time, *arrays)
        return out[0]

    def stream_measurements(
        self,
        poses: Mapping[str, Pose],
        twists: Mapping[str, Twist] | None,
        time: float,
        robot_q: np.ndarray | None = None,
        max_step: float = 0.02,
        max_gap: float = 0.1,
    ) -> list[tuple[float, Measurements]]:
        """``[(t_j, targets_j)]``: the IK steps up to this sample (module docstring), the last one this
        sample's (a single step when it follows the previous one within ``max_step``, comes after a gap
        longer than ``max_gap``, or is the first; ``max_step`` 0: always a single step). ``robot_q`` as in
        :meth:`measurements`, for every step."""
        arrays = self._sample_arrays(poses, twists)
        previous = self._previous
        interval = float(time) - previous[0] if previous is not None else 0.0
        if previous is None or max_step <= 0.0 or not max_step + 1e-12 < interval <= max_gap + 1e-9:
            return [(float(time), self.measurements(poses, twists, time, robot_q))]
        both = [np.array([previous[0], float(time)])]
        for before, now in zip(previous[1:], arrays, strict=True):
            both.append(None if before is None or now is None else np.concatenate((before, now)))
        steps, index = on_ik_steps(*both, max_step)
        steps = [None if x is None else x[1:] for x in steps]  # the previous sample was stepped already
        self._sample_time(time)
        out, flags = self.compute(*steps, robot_q=robot_q, replay=False, samples=index[1:] - 1)
        self.last_contacts = flags[-1]
        self._previous = (float(time), *arrays)
        return list(zip(steps[0].tolist(), out, strict=True))


def stream_path(
    rt, motion, max_step: float = 0.02, max_gap: float = 0.1, settle: float = 0.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Measurements]]:
    """ik_node's path on ``motion`` without ROS, one sample at a time: ``(q, v, contacts, targets)`` at the
    samples. The first sample settles ``settle`` s (:meth:`Retargeter.settle`) and answers with that state;
    its own IK step (``dt``: :func:`.ik_steps.first_step_dt`) runs when the second sample comes, before that
    sample's steps (:meth:`StreamInput.stream_measurements`), as the offline run steps them."""
    from dynik_ros.retarget.ik_steps import first_step_dt

    times, p, r, lv, av = rt.motion_arrays(motion)
    rt.reset()
    ik = rt.make_ik()
    ik.reset(rt.initial_configuration())
    q, v = np.zeros((len(times), rt.robot.nq)), np.zeros((len(times), rt.robot.nv))
    contacts = np.zeros((len(times), len(rt.config.feet)), dtype=int)
    targets: list[Measurements] = []
    for k in range(len(times)):
        if k == 1:  # the first sample's step, now that its dt is known
            ik.step(targets[0], first_step_dt(times[0], times[1], max_step, max_gap))
        poses = {link: (p[k, i], r[k, i]) for i, link in enumerate(rt.links)}
        twists = {link: (lv[k, i], av[k, i]) for i, link in enumerate(rt.links)}
        last = rt.last_sample_time
        steps = rt.stream_measurements(poses, twists, float(times[k]), ik.q, max_step, max_gap)
        contacts[k] = rt.last_contacts
        targets.append(steps[-1][1])
        if k == 0:
            if settle > 0:
                rt.settle(ik, targets[0], settle)
            q[k] = ik.q
            continue
        for t, m in steps:  # several when the stream is sparse
            q[k], v[k] = ik.step(m, min(t - last, max_gap))
            last = t
    return q, v, contacts, targets
