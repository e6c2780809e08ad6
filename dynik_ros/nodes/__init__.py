"""dynik_ros.nodes."""
