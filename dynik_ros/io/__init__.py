"""dynik_ros.io."""
