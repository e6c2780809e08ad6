"""Human whole-body dynamics from a suit and force/torque shoes (Latella et al. 2019, *Simultaneous
Floating-Base Estimation of Human Kinematics and Joint Torques*, Sensors 19:2794). ROS-free.

* :mod:`.base_velocity` -- the base twist that keeps the feet in contact still (eq. 7-10).
* :mod:`.base_feedforward` -- that twist as the dynamical IK's pelvis feed-forward (``base_velocity_source``).
* :mod:`.contact_classification` -- Algorithm 1 (offline), an online variant, the kinematic fallback.
* :mod:`.kinematic_contact` -- foot contact from sole height and speed with hysteresis (shared with the
  retargeter's :class:`~dynik_ros.retarget.foot_contact.FootContact`).
* :mod:`.map_dynamics` -- the MAP estimator of joint torques and foot wrenches (eq. 24-25, A5-A7).
* :mod:`.fixed_base` -- the human rooted at a still foot, for sec. 4.4's fixed- vs floating-base comparison.
* :mod:`.synthetic_dynamics` -- ground truth: inverse dynamics of the synthetic motions.
"""
