"""`foreign-receipt`: a receipt in a namespace that names another checkout. Pure."""

from __future__ import annotations

from lanewatch.model.detection import detects
from lanewatch.model.facts import ReceiptFound
from lanewatch.model.observation import Observation
from lanewatch.model.views import Evidence, Grade

KIND = "foreign-receipt"


@detects(KIND, reads=ReceiptFound)
def foreign_receipt(
    victim: str,
    namespace_checkout: str,
    path: str,
    receipt: object,
    *,
    mtime: float,
    size: int,
    sha256: str,
) -> Observation | None:
    """A receipt in the victim's namespace that names another checkout."""
    if not isinstance(receipt, dict):
        return None
    named = receipt.get("checkout_id")
    if not isinstance(named, str) or named == namespace_checkout:
        return None
    lane = receipt.get("lane") if isinstance(receipt.get("lane"), str) else None
    pid = receipt.get("pid") if isinstance(receipt.get("pid"), int) else None
    step = receipt.get("step") if isinstance(receipt.get("step"), str) else None
    ev = Evidence(
        path=path,
        time=mtime,
        size=size,
        sha256=sha256,
        grade=Grade.KNOWN.value,
        writer=f"lane {lane}" if lane else None,
        note=f"receipt names checkout {named}; this namespace belongs to {namespace_checkout}",
        key=f"receipt:{path}:{sha256}",
    )
    return Observation(
        kind=KIND,
        victim=victim,
        intruder_key=named,
        intruder={"checkout_id": named, "lane": lane, "pid": pid, "step": step},
        evidence=ev,
        summary=f"receipt {step or path} names checkout {named}",
    )
