"""Test sessions running at once on one machine must not share a ROS domain (they would receive each
other's messages): conftest claims one with a lock file that no other live session can take."""

import os
import subprocess
import sys
from pathlib import Path

# another session: its conftest claims a domain at import; then it asks for this session's domain on purpose
CLAIM = (
    "import sys; sys.path.insert(0, {here!r}); import conftest; "
    "claim = conftest._claim_domain({start}); "
    "print(conftest.DOMAIN_ID, claim[0], flush=True); sys.stdin.readline()"
)


def test_a_domain_held_by_a_live_session_is_not_given_again(private_domain):
    assert private_domain == int(os.environ["ROS_DOMAIN_ID"])
    here = str(Path(__file__).parent)
    held, domains = [], [private_domain]
    try:
        for _ in range(3):  # three more sessions alive at once, each aiming at this session's domain
            proc = subprocess.Popen(
                [sys.executable, "-c", CLAIM.format(here=here, start=private_domain - 1)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            held.append(proc)
            words = proc.stdout.readline().split()
            assert len(words) == 2, "the other session printed no claims"
            domains += [int(word) for word in words]
        assert all(1 <= domain <= 100 for domain in domains), domains
        assert len(set(domains)) == len(domains), domains
    finally:
        for proc in held:
            proc.stdin.close()
            proc.wait(60)
