"""dynik_ros.core."""
