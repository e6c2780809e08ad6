"""Human whole-body dynamics from a suit and force/torque shoes (Latella et al. 2019, *Simultaneous
Floating-Base Estimation of Human Kinematics and Joint Torques*, Sensors 19:2794). ROS-free.

* :mod:`.kinematic_contact` -- foot contact from sole height and speed with hysteresis (shared with the
  retargeter's :class:`~dynik_ros.retarget.scaling.FootContact`).
"""
