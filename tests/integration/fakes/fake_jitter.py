"""Test fake: a read phase of 0.1 to 0.6 s at random (a time that never settles)."""

import random
import time

KIND = "reference"


def load(request):
    with request.probe.phase("read"):
        time.sleep(random.uniform(0.1, 0.6))
    return None, None
