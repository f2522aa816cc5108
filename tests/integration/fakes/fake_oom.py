"""Test fake: allocates and touches memory until killed (bounded at 3 GiB, then waits)."""

import time

import numpy as np

KIND = "reference"


def load(request):
    held = []
    with request.probe.phase("read"):
        for _ in range(48):  # 48 x 64 MiB = 3 GiB at most
            buf = np.empty(64 << 20, dtype=np.uint8)
            buf[::4096] = 1
            held.append(buf)
            time.sleep(0.01)
        time.sleep(60)
    return None, None
