"""Test fake: aborts the process (SIGABRT) inside its `read` phase."""

import os
import sys

KIND = "reference"


def load(request):
    with request.probe.phase("read"):
        print("fake-crash: about to abort", file=sys.stderr, flush=True)
        os.abort()
