"""What a staged load's report says each device received, for the tests that hold a device to its
own regions of the model."""

from __future__ import annotations

from typing import Any

#: What a device may receive beyond its regions by design, where no chunk overlaps the one before
#: it: the offsets of the updates that assemble its shards (a few int32 a chunk).
OFFSETS_BOUND = 4096


def regions_received(report: Any) -> dict[str, int]:
    """Per device, the bytes the load sent it, less what it sent beyond the device's regions by
    design (`LoadReport.device_resent_bytes`: rows sent twice, the updates' offsets), which must
    be no more than `OFFSETS_BOUND`."""
    resent = report.device_resent_bytes or {}
    assert all(n <= OFFSETS_BOUND for n in resent.values()), resent
    return {d: n - resent.get(d, 0) for d, n in report.device_received_bytes.items()}
