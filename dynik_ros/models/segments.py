"""The 23 physical segments of an Xsens suit (MVN), parents before children.

The order is also MVN's segment numbering (id = index + 1) in its network stream and the order of the human
models' physical links. Pure data, no imports: the stream parser and the model generator share it.
"""

XSENS_SEGMENTS: tuple[str, ...] = (
    "Pelvis", "L5", "L3", "T12", "T8", "Neck", "Head",
    "RightShoulder", "RightUpperArm", "RightForeArm", "RightHand",
    "LeftShoulder", "LeftUpperArm", "LeftForeArm", "LeftHand",
    "RightUpperLeg", "RightLowerLeg", "RightFoot", "RightToe",
    "LeftUpperLeg", "LeftLowerLeg", "LeftFoot", "LeftToe",
)  # fmt: skip
