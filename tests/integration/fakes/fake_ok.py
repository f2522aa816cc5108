"""Test fake: reads the checkpoint's bytes in a `read` phase (a reference strategy, no model)."""

from pathlib import Path

KIND = "reference"


def load(builder, path, probe, args, options):
    with probe.phase("read"):
        files = [Path(path)] if Path(path).is_file() else sorted(Path(path).glob("*.safetensors"))
        data = [f.read_bytes() for f in files]
    del data
    return None, None
