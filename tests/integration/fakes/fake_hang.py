"""Test fake: never returns (the runner's timeout must end it)."""

import time

KIND = "reference"


def load(request):
    with request.probe.phase("read"):
        while True:
            time.sleep(1)
