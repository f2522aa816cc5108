"""`scripts/tensor_walk.py --check`: one tensor's walk through the sharded engine stays within
eight files, none entered more than twice, and stops where `docs/design.md`'s table says (issue
55), counted from a real load in a fresh process (the script profiles every call)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "tensor_walk.py"


def _walk_module():
    spec = importlib.util.spec_from_file_location("tensor_walk", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sharded_walk_is_what_the_design_page_tells():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--sharded", "--check", "8"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "files: 8" in done.stdout


def test_the_page_is_read_as_written_and_a_drift_is_seen():
    walk = _walk_module()
    told = walk.documented(walk.SECTIONS["sharded"])
    assert told["read"][-3:] == ["sharded/slices.py", "sharded/files.py", "format/source.py"]
    assert set(told) == {"plan", "read", "put"}
    drifted = walk.Walk()
    drifted.stops = {stop: ["loader/load.py"] for stop in told}  # stops anywhere else
    assert walk._checked(drifted, {"loader/load.py": 1}, 8, walk.SECTIONS["sharded"]) == 1
