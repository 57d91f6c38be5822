"""A lane's port lease over its life: taken with the claim, in its stamp and its command's
environment, freed with its release (`lanes/leases.py` holds the machine-wide leases).

A lease that cannot be taken never stops a lane: it runs without one, `note` says why (and
`lanewatch run` prints it once), and its stamp has no `ports`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lanewatch.lanes.leases import Holder, Lease, LeaseUnavailable, block_size, free, take
from lanewatch.linux.procid import ProcessIdentity

if TYPE_CHECKING:
    from lanewatch.lanes.target import LaneTarget


class LaneLease:
    def __init__(self, size: int | None = None) -> None:
        """`size`: ports to lease; None: `$LANEWATCH_PORT_BLOCK` (default 10); 0: none."""
        self.size = size
        self.lease: Lease | None = None
        self.note: str | None = None  # why the lane has no lease, when it wanted one

    def take(
        self, me: ProcessIdentity, user: str, lane: str, target: LaneTarget
    ) -> list[int] | None:
        """Lease the block; the stamp's `ports` field ([first, count]) or None."""
        self.free()
        self.note = None
        try:
            size = block_size() if self.size is None else self.size
            if size <= 0:
                return None
            holder = Holder(me, user, lane, str(target.namespace), target.checkout.checkout_id)
            self.lease = take(holder, size)
        except LeaseUnavailable as exc:
            self.note = str(exc)
            return None
        except OSError as exc:  # a folder that failed mid-way: the lane runs all the same
            self.note = f"the lease folder failed: {exc.strerror or exc}"
            return None
        return [self.lease.first, self.lease.count]

    def env(self) -> dict[str, str]:
        return self.lease.env() if self.lease is not None else {}

    def free(self) -> None:
        lease, self.lease = self.lease, None
        if lease is not None:
            free(lease)
