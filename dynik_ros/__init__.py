"""dynik_ros: real-time human motion tracking and retargeting with dynamical inverse kinematics."""

import os

# The solver's dense algebra is small (tens of rows): BLAS worker threads only add latency and jitter
# to a real-time step. Applies when dynik_ros is imported before numpy (console scripts, nodes);
# set OPENBLAS_NUM_THREADS / OMP_NUM_THREADS yourself to override.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

__version__ = "0.1.0"
