"""Test fake: raises inside its `read` phase."""

KIND = "reference"


def load(builder, path, probe, args, options):
    with probe.phase("read"):
        raise RuntimeError("fake-raise: the strategy failed on purpose")
