"""dynik_ros.bench."""
