"""Command-line tools of dynik_ros."""
