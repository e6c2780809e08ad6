"""dynik_ros.motion."""
