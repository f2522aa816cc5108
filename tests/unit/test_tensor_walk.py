"""`scripts/tensor_walk.py --check`: every walk `docs/design.md` tells (pipelined local,
`--staging`, `gs://`, sharded local, sharded over a URL) is run from a real load in a fresh
process (the script profiles every call) and stops exactly where the page's table of that walk
says, within the files the page states, none entered more than twice; so the page cannot drift
from the code."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "tensor_walk.py"


def _walk_module():
    spec = importlib.util.spec_from_file_location("tensor_walk", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WALK = _walk_module()
TOLD = WALK.documented()
#: The walks the page must tell (issue 72), and the most files each may pass.
WALKS = {
    (): 8,
    ("--staging",): 7,
    ("--remote", "gs"): 13,
    ("--sharded",): 8,
    ("--sharded", "--remote", "gs"): 12,
}


def _fake_gcs_missing() -> bool:
    sys.path.insert(0, str(ROOT))
    from bench.link.serve import fake_gcs_binary

    return fake_gcs_binary() is None


def test_the_page_tells_every_walk():
    missing = set(WALKS) - set(TOLD)
    assert not missing, f"walks without a table in docs/design.md: {missing}"
    assert all(TOLD[args] for args in WALKS), "a walk's table has no stop"


@pytest.mark.parametrize("args", sorted(WALKS), ids=lambda a: " ".join(a) or "pipelined")
def test_each_walk_is_what_the_design_page_tells(args):
    if "gs" in args and _fake_gcs_missing():
        pytest.skip("fake-gcs-server is not installed (the remote extra)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-W", "ignore", str(SCRIPT), *args, "--check", str(WALKS[args])],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    printed = {line.split()[0] for line in done.stdout.splitlines() if line[:1].isalpha()}
    assert printed & set(WALK.STOPS) == set(TOLD[args])


def test_the_page_is_read_as_written_and_a_drift_is_seen():
    told = TOLD[("--sharded",)]
    assert told["read"][-3:] == ["sharded/slices.py", "sharded/files.py", "format/source.py"]
    assert set(told) == {"plan", "read", "put"}
    assert set(TOLD[("--staging",)]) == {"plan", "put"}  # mapped pages: nothing is read
    drifted = WALK.Walk()
    drifted.stops = {stop: ["loader/load.py"] for stop in told}  # stops anywhere else
    assert WALK._checked(drifted, {"loader/load.py": 1}, 8, told) == 1
    drifted.stops = {stop: [f"loader/{f}" for f in files] for stop, files in told.items()}
    assert WALK._checked(drifted, {"loader/load.py": 1}, 8, told) == 0
    drifted.stops["open"] = ["loader/load.py"]  # a stop the page does not tell
    assert WALK._checked(drifted, {"loader/load.py": 1}, 8, told) == 1
    assert WALK.walk_args(["--sharded", "--remote", "gs", "--check", "12"]) in WALKS
