"""``/dynik/markers`` of ik_node: targets against achieved frames and the skeleton, as one MarkerArray.

A mixin of :class:`~dynik_ros.nodes.ik_node.IKNode` (it reads the node's model, targets and parameters);
the MarkerArray is built once and its points are overwritten in place at each publication.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
from geometry_msgs.msg import Point
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from dynik_ros.core.targets import Measurements
from dynik_ros.nodes.cdr_writer import MarkerArrayWriter
from dynik_ros.nodes.conversions import LinkStates, ns_to_stamp


class MarkerBuilder:
    """Preparation and filling of the marker array (see the module docstring)."""

    def _prepare_markers(self) -> None:
        """The frames drawn as axes, the skeleton's (child, parent) pairs and a preallocated MarkerArray
        whose points are overwritten in place at each publication (ten times cheaper than new objects)."""
        model = self.robot.model
        frames = list(dict.fromkeys(t.frame for t in self.targets.targets))
        self._marker_frames = [(name, self.robot.frame_id(name)) for name in frames]
        self._marker_links = [next(t.source for t in self.targets.targets if t.frame == f) for f in frames]
        if self._skeleton_names is not None:
            known = set(frames)
            pairs = [(c, p) for c, p in self._skeleton_names if c in known and p in known]
        else:  # nearest tracked ancestor in the kinematic tree
            by_joint: dict[int, str] = {}
            for name, fid in self._marker_frames:
                by_joint.setdefault(model.frames[fid].parentJoint, name)
            pairs = []
            for name, fid in self._marker_frames:
                joint = model.parents[model.frames[fid].parentJoint]
                while joint > 0 and joint not in by_joint:
                    joint = model.parents[joint]
                if joint in by_joint:
                    pairs.append((name, by_joint[joint]))
        self._skeleton_links = pairs
        self._skeleton_index = np.array(
            [(frames.index(c), frames.index(p)) for c, p in pairs], dtype=int
        ).reshape(-1, 2)
        self._marker_data = model.createData()
        n, n_pairs = len(frames), len(pairs)
        axis_rgb = ((1.0, 0.1, 0.1), (0.1, 0.9, 0.1), (0.2, 0.3, 1.0))

        def marker(ns: str, mid: int, width: float, points: int, color: tuple, alpha: float = 1.0) -> Marker:
            m = Marker(ns=ns, id=mid, type=Marker.LINE_LIST, action=Marker.ADD)
            m.header.frame_id = self.params["world_frame"]
            m.pose.orientation.w = 1.0
            m.scale.x = m.scale.y = m.scale.z = width
            m.points = [Point() for _ in range(points)]
            m.color = ColorRGBA(r=color[0], g=color[1], b=color[2], a=alpha)
            return m

        # One marker per axis (x red, y green, z blue) rather than per-vertex colours: half the data to
        # convert when publishing.
        markers = [marker("targets", i, 0.008, 2 * n, rgb, 0.35) for i, rgb in enumerate(axis_rgb)]
        markers += [marker("achieved", i, 0.004, 2 * n, rgb) for i, rgb in enumerate(axis_rgb)]
        markers.append(marker("skeleton", 0, 0.01, 2 * n_pairs, (1.0, 1.0, 1.0)))
        if self.retargeter is None:
            markers.append(marker("measured_skeleton", 0, 0.006, 2 * n_pairs, (1.0, 0.6, 0.1), 0.6))
        self._marker_array = MarkerArray(markers=markers)
        self._marker_writer: MarkerArrayWriter | None = None  # laid out at the first publication

    def _markers(
        self, stamp: int, q: np.ndarray, links: LinkStates, measurements: Measurements
    ) -> MarkerArray:
        """The marker array as a message (see :meth:`_marker_clouds`)."""
        clouds = self._marker_clouds(q, links, measurements)
        header_stamp = ns_to_stamp(stamp)
        for marker, cloud in zip(self._marker_array.markers, clouds, strict=True):
            marker.header.stamp = header_stamp
            for point, (x, y, z) in zip(marker.points, cloud.tolist(), strict=True):
                point.x, point.y, point.z = x, y, z
        return self._marker_array

    def _marker_bytes(
        self, stamp: int, q: np.ndarray, links: LinkStates, measurements: Measurements
    ) -> bytes:
        """The marker array serialized from its template (``cdr_writer.MarkerArrayWriter``): no Point
        objects touched, about ten times cheaper than :meth:`_markers`."""
        if self._marker_writer is None:
            self._marker_writer = MarkerArrayWriter(self._marker_array)
        return self._marker_writer.serialize(stamp, self._marker_clouds(q, links, measurements))

    def _marker_clouds(
        self, q: np.ndarray, links: LinkStates, measurements: Measurements
    ) -> list[np.ndarray]:
        """Points of each marker: targets (translucent axes, at the measured links for a human model) vs
        achieved frames (opaque axes), the achieved skeleton (white) and, for a human model, the measured
        skeleton (orange)."""
        data = self._marker_data
        pin.framesForwardKinematics(self.robot.model, data, q)
        achieved_p = np.array([data.oMf[fid].translation for _, fid in self._marker_frames])
        achieved_r = np.array([data.oMf[fid].rotation for _, fid in self._marker_frames])
        target_p, target_r = achieved_p.copy(), achieved_r.copy()
        ori = dict(zip(self.targets.orientation_links, measurements.rotations, strict=True))
        pos = dict(zip(self.targets.position_links, measurements.positions, strict=True))
        measured = {n: i for i, n in enumerate(links.names)}
        for i, link in enumerate(self._marker_links):
            if link in ori:
                target_r[i] = ori[link]
            if self.retargeter is None and link in measured:
                target_p[i] = links.positions[measured[link]]
            elif link in pos:
                target_p[i] = pos[link]

        def axes(p: np.ndarray, r: np.ndarray, length: float) -> list[np.ndarray]:
            """Per axis k: the segments (origin, origin + length * R e_k) of every frame."""
            return [np.stack((p, p + length * r[:, :, k]), axis=1).reshape(-1, 3) for k in range(3)]

        clouds = axes(target_p, target_r, 0.12) + axes(achieved_p, achieved_r, 0.08)
        clouds.append(achieved_p[self._skeleton_index].reshape(-1, 3))
        if self.retargeter is None:
            clouds.append(target_p[self._skeleton_index].reshape(-1, 3))
        return clouds
