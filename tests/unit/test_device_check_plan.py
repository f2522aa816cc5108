"""`scripts/device-check.sh`'s decisions, one function at a time (the script sourced, nothing run):
which platform jax sees, where each missing package comes from (the host's own index first, the
carried wheels otherwise), and which packages a platform skips and why. No jax, no device, no
network. The tables it then runs are `scripts/device_check.py`'s (test_device_check_parts.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "device-check.sh"


def sh(call: str, **env: str) -> subprocess.CompletedProcess:
    """Run `call` in bash after sourcing the script (its functions only)."""
    return subprocess.run(
        ["bash", "-c", f'source "{SCRIPT}" && {call}'],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd=ROOT,
        timeout=120,
    )


def out(call: str, **env: str) -> str:
    proc = sh(call, **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.strip()


def _fake_python(tmp_path: Path, platform: str) -> Path:
    """A `python` whose jax sees a `platform` device (prints what MACHINE_PY prints)."""
    py = tmp_path / f"py-{platform}"
    py.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "3.11.2 jax 0.10.2 numpy 2.0"; echo "[{platform}(id=0)]"; '
        f'echo "platform {platform}"; echo "JAX_PLATFORMS=${{JAX_PLATFORMS:-}}" >&2\n'
    )
    py.chmod(0o755)
    return py


def test_sourcing_the_script_runs_nothing(tmp_path):
    proc = sh("echo sourced", OUT=str(tmp_path / "out"))
    assert proc.stdout.strip() == "sourced" and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("seen", "want"), [("tpu", "tpu"), ("gpu", "cuda"), ("cuda", "cuda"), ("cpu", "cpu")]
)
def test_the_platform_is_what_jax_sees_first(tmp_path, seen, want):
    py = _fake_python(tmp_path, seen)
    env = {k: v for k, v in os.environ.items() if k != "DEVICE_CHECK_PLATFORM"}
    proc = subprocess.run(
        ["bash", "-c", f'source "{SCRIPT}" && detect_platform "{py}" "{tmp_path}/facts"'],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == want
    assert f"platform {seen}" in (tmp_path / "facts").read_text()


def test_an_override_is_checked_against_what_jax_sees(tmp_path):
    tpu = _fake_python(tmp_path, "tpu")
    assert out(f'detect_platform "{tpu}" "{tmp_path}/f"', DEVICE_CHECK_PLATFORM="tpu") == "tpu"
    # the override is what jax is asked for; a host that gives something else fails the check
    assert "JAX_PLATFORMS=tpu" in (tmp_path / "f").read_text()
    proc = sh(f'detect_platform "{tpu}" "{tmp_path}/f"', DEVICE_CHECK_PLATFORM="cuda")
    assert proc.returncode != 0


def test_the_real_detection_on_this_host_says_cpu(tmp_path):
    proc = sh(f'detect_platform "{sys.executable}" "{tmp_path}/f"', DEVICE_CHECK_PLATFORM="cpu")
    assert proc.returncode == 0 and proc.stdout.strip() == "cpu"
    assert "platform cpu" in (tmp_path / "f").read_text()


def test_the_carried_wheels_folder_follows_the_platform():
    assert out("default_wheels tpu") == f"{ROOT}/.whl-tpu"
    assert out("default_wheels cuda") == f"{ROOT}/.whl"
    assert out("default_wheels cpu") == f"{ROOT}/.whl"


def _index(tmp_path: Path) -> Path:
    """A PEP 503 index (as /opt/pypi/simple is laid out): flax 0.12.8 and orbax-checkpoint."""
    simple = tmp_path / "simple"
    for name, wheel in [
        ("flax", "flax-0.12.8-py3-none-any.whl"),
        ("orbax-checkpoint", "orbax_checkpoint-0.11.0-py3-none-any.whl"),
    ]:
        (simple / name).mkdir(parents=True)
        (simple / name / "index.html").write_text(
            f'<a href="../../files/{wheel}#sha256=00">{wheel}</a>'
        )
    return simple


def _wheels(tmp_path: Path) -> Path:
    folder = tmp_path / "whl"
    folder.mkdir()
    for name in [
        "psutil-7.2.2-cp36-abi3-manylinux2010_x86_64.whl",
        "blake3-1.0.11-cp311-cp311-manylinux_2_17_x86_64.whl",
        "orbax_checkpoint-0.9.0-py3-none-any.whl",
    ]:
        (folder / name).write_bytes(b"")
    return folder


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ("flax", "index flax"),  # the host's index has it: from there
        ("flax==0.12.8", "index flax==0.12.8"),
        ("orbax-checkpoint", "index orbax-checkpoint"),
        ("Orbax_Checkpoint", "index Orbax_Checkpoint"),  # PEP 503 names
        ("psutil==7.2.2", "wheel {whl}/psutil-7.2.2-cp36-abi3-manylinux2010_x86_64.whl"),
        ("blake3==1.0.11", "wheel {whl}/blake3-1.0.11-cp311-cp311-manylinux_2_17_x86_64.whl"),
        # the index lacks that version: the carried wheel of it, or nothing
        ("flax==0.0.1", None),
        ("psutil==1.0", None),
        ("nosuch", None),
    ],
)
def test_a_missing_package_comes_from_the_index_first_then_the_wheels(tmp_path, spec, want):
    index, whl = _index(tmp_path), _wheels(tmp_path)
    proc = sh(f'install_source "{index}" "{whl}" "{spec}"')
    if want is None:
        assert proc.returncode == 1 and proc.stdout == ""
    else:
        assert proc.returncode == 0 and proc.stdout.strip() == want.format(whl=whl)


def test_without_an_index_the_wheels_serve(tmp_path):
    whl = _wheels(tmp_path)
    got = out(f'install_source "" "{whl}" orbax-checkpoint')
    assert got == f"wheel {whl}/orbax_checkpoint-0.9.0-py3-none-any.whl"


def test_a_cuda_only_line_is_skipped_elsewhere_with_its_reason(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (tmp_path / "list.txt").write_text(
        "# a comment\n\njson json\nrunai-model-streamer==0.17.1 runai_model_streamer cuda\n"
    )
    call = f'install_missing "{sys.executable}" {{}} "" "{tmp_path}" "{tmp_path}/list.txt" "{site}"'
    tpu = out(call.format("tpu"))
    assert "json: already there" in tpu
    assert "runai_model_streamer: skipped, a cuda only package (this host: tpu)" in tpu
    cuda = sh(call.format("cuda"))  # there it is needed, and there is no wheel of it
    assert cuda.returncode == 2
    assert "runai_model_streamer is missing" in cuda.stdout and "runai-model-streamer==0.17.1" in (
        cuda.stdout
    )


def test_a_module_missing_is_installed_from_the_index_with_pip(tmp_path):
    """The index route end to end: a PEP 503 file index with a real wheel, pip into --target,
    and the jax* / numpy* it would bring removed after it."""
    from tests.unit.test_device_check import _wheel

    files = tmp_path / "files"
    files.mkdir()
    _wheel(files)
    project = tmp_path / "simple" / "dcprobe-pkg"
    project.mkdir(parents=True)
    name = "dcprobe_pkg-0.1-py3-none-any.whl"
    (project / "index.html").write_text(f'<a href="../../files/{name}">{name}</a>')
    site = tmp_path / "site"
    (site / "numpy").mkdir(parents=True)  # as if pip had brought numpy as a dependency
    (tmp_path / "list.txt").write_text("dcprobe-pkg dcprobe_pkg\n")
    log = out(
        f'install_missing "{sys.executable}" tpu "{tmp_path}/simple" "{tmp_path}/none" '
        f'"{tmp_path}/list.txt" "{site}"'
    )
    assert f"dcprobe_pkg: missing, installing dcprobe-pkg from {tmp_path}/simple" in log
    assert (site / "dcprobe_pkg" / "__init__.py").read_text() == "VALUE = 23\n"
    assert not (site / "numpy").exists()


def test_small_helpers():
    assert out("skipped_on cuda tpu && echo skip") == "skip"
    assert out("skipped_on '' tpu || echo kept") == "kept"
    assert out("skipped_on cuda,rocm cuda || echo kept") == "kept"
    assert out("index_name Orbax_Checkpoint") == "orbax-checkpoint"
