"""`scripts/device-check.sh` end to end on the CPU backend (`DEVICE_CHECK_PLATFORM=cpu`, tiny
shapes, its first part): a wheel that is missing is installed from the wheels folder (a real wheel,
built here), one that is there is left alone, every step writes its file under $OUT, the results
carry the staged pipelined load, and the cast table holds its three casts. A listed module with no
wheel stops the script in one line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "device-check.sh"


def _wheel(folder: Path) -> None:
    """A minimal pure-Python wheel of module `dcprobe_pkg` (pip installs it with --no-index)."""
    name = folder / "dcprobe_pkg-0.1-py3-none-any.whl"
    info = "dcprobe_pkg-0.1.dist-info"
    files = {
        "dcprobe_pkg/__init__.py": "VALUE = 23\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: dcprobe-pkg\nVersion: 0.1\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{f},,\n" for f in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(name, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)


def _run(tmp_path: Path, wheel_list: str, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "wheels.txt").write_text(wheel_list)
    env = {
        **os.environ,
        "DEVICE_CHECK_PLATFORM": "cpu",
        "DEVICE_CHECK_SMALL": "tiny-gpt2",
        "DEVICE_CHECK_RESULTS": str(tmp_path / "results"),
        "DEVICE_CHECK_REPEATS": "1",
        "DEVICE_CHECK_STRATEGIES": "pipelined,zerocopy",
        "DEVICE_CHECK_WHEELS": str(tmp_path),
        "DEVICE_CHECK_WHEEL_LIST": str(tmp_path / "wheels.txt"),
        "OUT": str(tmp_path / "out"),
        "XLA_FLAGS": "",
        **env,
    }
    return subprocess.run(
        ["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=600
    )


def test_the_device_check_runs_end_to_end_on_cpu(tmp_path):
    import sys

    _wheel(tmp_path)
    proc = _run(
        tmp_path, "blake3==1.0.11 blake3\ndcprobe-pkg==0.1 dcprobe_pkg\n", PYTHON=sys.executable
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = tmp_path / "out"
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "bench.txt",
        "device-check.log",
        "machine.txt",
        "probe.json",
        "results.jsonl",
        "summary.md",
    ]
    log = (out / "device-check.log").read_text()
    assert "blake3: already there" in log
    assert "dcprobe_pkg: missing, installing dcprobe_pkg-0.1-py3-none-any.whl" in log
    for step in ("install", "machine", "synthesize tiny-gpt2", "probe", "bench run", "summary"):
        assert f"] {step}" in log, step
    assert "platform: cpu" in log
    # the bench's own probe, taken once before the benches, sized for the sets (the smallest
    # `bench run` takes), and every row held against it: no bench run probed again
    probe = json.loads((out / "probe.json").read_text())
    assert probe["probe_file_bytes"] == 32 << 20 and probe["warm_read_reused_bytes_per_s"] > 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    held = {r["ceiling_probe_id"] for r in rows if r.get("record") == "phase"}
    assert held == {probe["probe_id"]}
    totals = [r for r in rows if r.get("record") == "phase" and r["phase"] == "total"]
    plain = {r["strategy"]: r for r in totals if not r.get("model_dtype")}
    # staged (the route is the pipeline's own choice: pageable, mapped, pinned)
    staged = plain["pipelined"]["staging_memory"]
    assert plain["pipelined"]["status"] == "ok" and staged
    assert plain["zerocopy"]["staging_memory"] is None
    summary = (out / "summary.md").read_text()
    assert "| tiny-gpt2 | spec | pipelined | ok (1/1)" in summary and f"| {staged} |" in summary
    # the cast table: the three casts of issue 73, each against the plain load
    casts = re.findall(r"^\| tiny-gpt2 \| (\S+ -> \S+) \| .* \| (\d\.\d\dx) \|", summary, re.M)
    assert sorted(c for c, _ in casts) == [
        "F32 -> bfloat16",
        "bfloat16 -> float32",
        "float16 -> bfloat16",
    ]
    assert "x the plain load (" in summary


def test_a_listed_module_without_its_wheel_stops_the_check_in_one_line(tmp_path):
    import sys

    proc = _run(tmp_path, "nosuchpkg==1.0 nosuchmod\n", PYTHON=sys.executable)
    assert proc.returncode == 2
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("device-check: error:")]
    assert "nosuchmod is missing" in line and "nosuchpkg==1.0" in line
    assert not (tmp_path / "out" / "machine.txt").exists()
