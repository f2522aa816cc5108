"""Test fake: allocates and touches memory until killed (bounded at 3 GiB, then waits).

The buffers are `host_buffer`s (ordinary pages), not `np.empty`: numpy asks for transparent huge
pages on large arrays, and where the page cache has fragmented memory, faulting those in stalls
in compaction (1 GiB of `np.empty` buffers took 13.3 s once on the development VM, against 0.6 s
in ordinary pages), long enough for the runner's timeout to end the child before its budget does.
"""

import time

import numpy as np

from loader.format.buffers import host_buffer

KIND = "reference"


def load(request):
    held = []
    with request.probe.phase("read"):
        for _ in range(48):  # 48 x 64 MiB = 3 GiB at most
            buf = host_buffer((64 << 20,), np.uint8)
            buf[::4096] = 1
            held.append(buf)
            time.sleep(0.01)
        time.sleep(60)
    return None, None
