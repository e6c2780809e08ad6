"""dynik_ros.models."""
