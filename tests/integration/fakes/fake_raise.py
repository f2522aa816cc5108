"""Test fake: raises inside its `read` phase."""

KIND = "reference"


def load(builder, path, probe, strict=False):
    with probe.phase("read"):
        raise RuntimeError("fake-raise: the strategy failed on purpose")
