"""Test fake: raises inside its `read` phase."""

KIND = "reference"


def load(request):
    with request.probe.phase("read"):
        raise RuntimeError("fake-raise: the strategy failed on purpose")
