"""``dynik-ros run human66_dynamics`` and launch/human66_dynamics.launch.py (issue 13): wearable_node (the
synthetic walk and its true shoe readings) -> dynamics_node with real rclpy on a private domain; the
torques published (recorded to a bag) are the offline estimate (``dynik-dynamics --synthetic``) of the same
motion, and the runner's figures compare them with the inverse-dynamics truth."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("private_domain")

RATE, DURATION = 60.0, 1.5


def test_pipeline_publishes_the_offline_estimate(tmp_path, capfd):
    from dynik_ros.cli.dynamics import main as dynamics_cli
    from dynik_ros.cli.run import run_pipeline
    from dynik_ros.io.bags import read_messages

    m = run_pipeline("human66_dynamics", {"wearable_node.rate": RATE}, tmp_path, duration=DURATION)
    printed = capfd.readouterr().out
    n = int(round(RATE * DURATION))
    d = m["dynamics"]
    assert not m["timed_out"] and m["samples_published"] == n
    assert d["received"] == n and not d["refused"] and d["shoes_received"] == [n, n]
    assert d["estimates"] == n - 2 and d["shoes_missing"] == 0  # one sample late, central differences
    assert d["truth_samples"] == n - 2 and d["truth_rmse"] < 1e-3 * d["truth_peak"]
    assert "dynamics_node" in printed and "vs truth" in printed and "torques" in printed
    torques = [item.msg for item in read_messages(m["bag"], ["/human/joint_torques"])]
    assert len(torques) == n - 2
    assert m["bag_counts"]["/human/shoes/right"] == n
    # the offline chain on the same motion and shoes
    out = tmp_path / "offline.npz"
    cli_args = ["--synthetic", "walking", "--duration", str(DURATION), "--rate", str(RATE), "--out", str(out)]
    assert dynamics_cli(cli_args) == 0
    offline = np.load(out)
    first = d["first_stamp_ns"]
    for msg in torques:
        stamp = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
        k = int(np.argmin(np.abs(offline["times"] - (stamp - first) * 1e-9)))
        assert abs(offline["times"][k] - (stamp - first) * 1e-9) < 1e-6
        assert list(msg.name) == list(offline["joint_names"])
        # the link states cross the wire as quaternions: equal to rounding
        np.testing.assert_allclose(np.array(msg.effort), offline["tau"][k], atol=1e-6)


def test_publish_shoes_needs_the_synthetic_source(tmp_path):
    from dynik_ros.cli.run import PipelineError, run_pipeline

    with pytest.raises(PipelineError, match="publish_shoes"):
        overrides = {"wearable_node.source": "bag", "wearable_node.bag_path": str(tmp_path)}
        run_pipeline("human66_dynamics", overrides, None, quiet=True)
