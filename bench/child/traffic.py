"""Bytes each device received during a load, against the bytes of its shards of the loaded model.

`DeviceTraffic.watching()` wraps `jax.device_put` for the duration of the load (strategies call
it as `jax.device_put`, so the wrapper sees every placement they make): for each array it returns,
every addressable shard whose device did not already hold the source counts as received by that
device (a host array counts on every device it lands on; a `pinned_host` staging copy counts on
none, being host memory). `expected(model)` is what each device holds once the model is loaded:
the bytes of its addressable shards of every array leaf. A device that received more than that
got a transient copy (a whole tensor on the default device before a reshard, a replicated
`device_put` later cut down): `overreceived` names it, and the bench flags the row.
Peers that place through torch are not seen (nothing received is recorded for them).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from typing import Any

HOST_KINDS = ("pinned_host", "unpinned_host")


def _shard_bytes(shard: Any, shape: tuple[int, ...], itemsize: int) -> int:
    dims = [len(range(*s.indices(n))) for s, n in zip(shard.index, shape)]
    return math.prod(dims) * itemsize


def _received(source: Any, out: Any) -> dict[str, int]:
    """Per device, the bytes `out`'s shards brought to devices that did not hold `source`."""
    import jax

    if not isinstance(out, jax.Array) or out.sharding.memory_kind in HOST_KINDS:
        return {}
    on_device = isinstance(source, jax.Array) and source.sharding.memory_kind not in HOST_KINDS
    held = set(source.devices()) if on_device else set()  # a pinned_host copy is still host
    got: dict[str, int] = {}
    for shard in out.addressable_shards:
        if shard.device not in held:
            n = _shard_bytes(shard, out.shape, out.dtype.itemsize)
            got[str(shard.device)] = got.get(str(shard.device), 0) + n
    return got


class DeviceTraffic:
    """Counts what `jax.device_put` sends each device while `watching()`."""

    def __init__(self) -> None:
        self.received: dict[str, int] = {}
        self.failed: str | None = None
        self._lock = threading.Lock()

    def _count(self, source: Any, out: Any) -> None:
        """Add what `out` brought each device; a placement it cannot read stops the counting
        (`failed` says why, and `received` is emptied: unknown, never a wrong figure)."""
        import jax

        if self.failed:
            return
        try:
            for src, dst in zip(jax.tree.leaves(source), jax.tree.leaves(out)):
                for device, n in _received(src, dst).items():
                    with self._lock:
                        self.received[device] = self.received.get(device, 0) + n
        except Exception as exc:  # noqa: BLE001 - the count must never break the load
            self.failed = f"{type(exc).__name__}: {exc}"
            self.received = {}

    @contextlib.contextmanager
    def watching(self) -> Iterator[DeviceTraffic]:
        import jax

        real = jax.device_put

        def counting(x: Any, *args: Any, **kwargs: Any) -> Any:
            out = real(x, *args, **kwargs)
            self._count(x, out)
            return out

        jax.device_put = counting
        try:
            yield self
        finally:
            jax.device_put = real


def expected(model: Any) -> dict[str, int]:
    """Per device, the bytes of its addressable shards of the model's array leaves."""
    import jax
    from flax import nnx

    want: dict[str, int] = {}
    leaves = jax.tree.leaves(nnx.state(model)) if model is not None else []
    for leaf in leaves:
        if isinstance(leaf, jax.Array) and not jax.dtypes.issubdtype(
            leaf.dtype, jax.dtypes.prng_key
        ):
            for device, n in _received(None, leaf).items():
                want[device] = want.get(device, 0) + n
    return want


def overreceived(received: dict[str, int], want: dict[str, int]) -> list[str]:
    """The devices that received more than their shards (sorted)."""
    return sorted(d for d, n in received.items() if n > want.get(d, 0))
