"""`make sizes` (scripts/sizes.py) reports module, folder and function sizes and never fails on
them: a long module is listed, not refused. Sizes are a guide; ruff's complexity rules in
`make lint` are the check."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "sizes.py"


def _sizes():
    spec = importlib.util.spec_from_file_location("sizes", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["sizes"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_a_long_module_and_function_are_reported_not_refused(tmp_path):
    sizes = _sizes()
    pkg = tmp_path / "pkg" / "sub"
    pkg.mkdir(parents=True)
    body = "\n".join(f"        x{i} = {i}" for i in range(450))
    (pkg / "big.py").write_text(f"class C:\n    def long(self):\n{body}\n")
    (pkg / "small.py").write_text("def f():\n    return 1\n")
    text = sizes.report(sizes.read_tree(tmp_path, ("pkg",)), top=5)
    assert "  452  pkg/sub/big.py" in text and "    2  pkg/sub/small.py" in text
    assert "  451  pkg/sub/big.py:C.long" in text
    assert "    2  pkg/sub/" in text and " 401+     1" in text


def test_the_script_reports_this_tree_and_exits_0():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--top", "3"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "modules per folder:" in done.stdout and "loader/pipeline/" in done.stdout
