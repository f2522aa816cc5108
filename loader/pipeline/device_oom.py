"""A device that runs out of memory mid-load: one error naming the tensor, the device and its
free memory (`DeviceOutOfMemoryError`; the bench records it as an `oom` row of kind `device`)."""

from __future__ import annotations

from loader.errors import DeviceOutOfMemoryError


def is_out_of_memory(exc: BaseException) -> bool:
    text = str(exc)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


def free_memory(device: object) -> str:
    """The device's free memory, as its allocator reports it ("unknown" where it does not)."""
    try:
        stats = device.memory_stats() or {}  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - a backend without the call
        stats = {}
    if "bytes_limit" not in stats:
        return "unknown free memory"
    free = int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    return f"{free} bytes free of {int(stats['bytes_limit'])}"


def oom_error(job: object, device: object, nbytes: int) -> DeviceOutOfMemoryError:
    """A device OOM as one error naming the tensor, the device and its free memory."""
    return DeviceOutOfMemoryError(
        f"{getattr(job, 'where', '?')}: device {device} ran out of memory receiving {nbytes} bytes "
        f"({free_memory(device)})"
    )
