"""What the C allocator keeps after a load: the one term of a peak that is not the model's bytes.

A strategy that reads each tensor into a `malloc`ed buffer (numpy's default), hands it on and
frees it leaves holes in glibc's heap. glibc returns a freed block to the kernel only if it was
`mmap`ed; its mmap threshold starts at 128 KiB but rises with each freed mapping, up to
`MMAP_THRESHOLD_MAX` (32 MiB on 64-bit), so a tensor under that can land in the heap and its hole
stays resident. A tensor over it is always mapped and returned on free.

So a load's retained heap grows with the bytes of its tensors under the threshold
(`small_tensor_bytes`), not with the checkpoint's: a checkpoint of large tensors (sa3-medium: 31%
of its bytes under 32 MiB) retains a smaller share than one of small tensors (gpt2: 72%). The
child measures what was retained (`heap_free_bytes`, glibc's `mallinfo2`, over every arena) and
`bench.analysis.fit` charges a target that many bytes per small-tensor byte. No jax.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable

from loader.format.libc import libc_function

#: glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit (4 MiB * sizeof(long)): the dynamic threshold's cap
MMAP_THRESHOLD_MAX = 32 << 20


def small_tensor_bytes(sizes: Iterable[int]) -> int:
    """The bytes of the tensors under `MMAP_THRESHOLD_MAX`: the ones that can stay in the heap."""
    return sum(n for n in sizes if n < MMAP_THRESHOLD_MAX)


class _MallInfo2(ctypes.Structure):
    _fields_ = [  # noqa: RUF012 (ctypes' own declaration)
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _mallinfo2():  # type: ignore[no-untyped-def]
    """glibc's `mallinfo2` (2.33+), or None (musl, macOS, an older glibc)."""
    fn = libc_function("mallinfo2")
    if fn is None:
        return None
    fn.restype, fn.argtypes = _MallInfo2, []
    return fn


_MALLINFO2 = _mallinfo2()


def heap_free_bytes() -> int | None:
    """The free bytes glibc holds in its heaps, every arena (`fordblks`); None without glibc."""
    return None if _MALLINFO2 is None else int(_MALLINFO2().fordblks)
