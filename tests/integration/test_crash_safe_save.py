"""A writer process killed mid-save leaves the previous checkpoint intact and loadable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from flax import nnx

import loader

WRITER = textwrap.dedent(
    """
    import sys, time
    import jax.numpy as jnp
    from flax import nnx
    import loader.save.write as save

    class Big(nnx.Module):
        def __init__(self):
            self.layers = nnx.List([nnx.Param(jnp.full((256, 1024), float(i))) for i in range(64)])

    slow_host = save.host_copy
    def host(path, value):  # slow each tensor down so the parent can kill us mid-write
        time.sleep(0.05)
        return slow_host(path, value)
    save.host_copy = host
    print("writing", flush=True)
    save.save_model(Big(), sys.argv[1])
    """
)


class Small(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.w = nnx.Linear(4, 4, rngs=rngs)


def test_killed_writer_leaves_previous_file_intact(tmp_path: Path, poison):
    path = tmp_path / "model.safetensors"
    original = Small(nnx.Rngs(0))
    loader.save_model(original, path)
    before = path.read_bytes()
    env = {**os.environ, "XLA_FLAGS": ""}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, env=env
    )
    try:
        assert proc.stdout.readline().strip() == b"writing"
        deadline = time.time() + 60
        while time.time() < deadline:
            temps = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
            if temps and temps[0].stat().st_size > 1_000_000:
                break
            time.sleep(0.02)
        else:
            raise AssertionError("the writer never started writing its temp file")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert path.read_bytes() == before, "a killed save must not touch the previous file"
    target = Small(nnx.Rngs(1))
    poison(target)
    model, report = loader.load_model(target, path, strict=True)
    assert report.ok
    assert (model.w.kernel[...] == original.w.kernel[...]).all()
