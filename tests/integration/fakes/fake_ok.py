"""Test fake: reads the checkpoint's bytes in a `read` phase (a reference strategy, no model)."""

from pathlib import Path

KIND = "reference"


def load(request):
    path = Path(request.path)
    with request.probe.phase("read"):
        files = [path] if path.is_file() else sorted(path.glob("*.safetensors"))
        data = [f.read_bytes() for f in files]
    del data
    return None, None
