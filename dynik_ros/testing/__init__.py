"""Fuzz and soak harness helpers, ROS-free: input mutations (link states, MVN datagrams) and the invariant
checkers run on what the nodes output. ``benchmarks/fuzz_inputs.py`` and ``benchmarks/soak.py`` drive the
real nodes with them; ``test/test_fuzz_harness.py`` checks that the checkers can fail."""
