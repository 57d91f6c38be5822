"""Whether this machine gives a lane a network of its own (`--fence net`), for the tests that
need one to skip with the reason where it does not."""

from __future__ import annotations

from lanewatch.runner import fence as fences
from lanewatch.runner import netfence


def why_no_net_fence() -> str | None:
    """None where `--fence net` can be built here (slirp4netns, /dev/net/tun, the kernel's
    way), else why not."""
    path, why = netfence.tool()
    return why if not path else fences.kernel_refusal()
