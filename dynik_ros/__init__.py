"""dynik_ros: real-time human motion tracking and retargeting with dynamical inverse kinematics."""

__version__ = "0.1.0"
