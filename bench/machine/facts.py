"""Machine facts stamped on every run: CPU, RAM, kernel, versions, allocator environment.

Versions come from package metadata, so nothing here imports jax. The command line is recorded
with anything that looks like a token redacted.
"""

from __future__ import annotations

import os
import platform
import re
import secrets
import socket
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import psutil

from bench.records.schema import RunRecord
from loader.host import usable_cpus

ALLOCATOR_VARS = ("PYTHONMALLOC", "XLA_FLAGS", "LD_PRELOAD", "XLA_PYTHON_CLIENT_PREALLOCATE")
_SECRET = re.compile(r"hf_[A-Za-z0-9]{8,}")


def machine_id() -> str:
    """A filesystem-safe id of this host (its short hostname)."""
    name = socket.gethostname().split(".")[0] or "host"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def utc_now() -> str:
    """Now, as the results files write it: `2026-01-10T10:15:00Z`."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def cpu_limit() -> float | None:
    """The CPUs this process may use when fewer than the machine has (`loader.host.usable_cpus`:
    its affinity mask, capped by the tightest cgroup CPU quota, v2 or v1), else None: no limit."""
    cpus = usable_cpus()
    return cpus if cpus < (os.cpu_count() or 1) else None


def new_run_id(now: datetime | None = None) -> str:
    """`YYYYmmddTHHMMSSZ-<6 hex>`."""
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def git_commit() -> str | None:
    """loadbench's own commit (`git describe --always --dirty` of the checkout this code runs
    from), or None where it is not a git checkout (an installed wheel) or git is absent."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=10"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def allocator_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment variables that change allocation behaviour (MALLOC_*, PYTHONMALLOC, ...)."""
    env = dict(os.environ) if env is None else env
    return {
        k: v
        for k, v in sorted(env.items())
        if k.startswith(("MALLOC_", "GLIBC_TUNABLES", "JEMALLOC", "TCMALLOC"))
        or k in ALLOCATOR_VARS
    }


def redact(argv: list[str]) -> list[str]:
    """The command line with token-like values and the value after `--token` replaced."""
    out, hide_next = [], False
    for arg in argv:
        out.append("<redacted>" if hide_next else _SECRET.sub("<redacted>", arg))
        hide_next = arg in ("--token", "--hf-token")
    return out


def run_record(run_id: str, argv: list[str] | None = None) -> RunRecord:
    """The `run` record of this host, now."""
    return RunRecord(
        run_id=run_id,
        machine=machine_id(),
        started_utc=utc_now(),
        cpu_model=cpu_model(),
        cpu_count=os.cpu_count() or 1,
        ram_bytes=psutil.virtual_memory().total,
        kernel=platform.release(),
        python=platform.python_version(),
        jax_version=version("jax"),
        flax_version=version("flax"),
        safetensors_version=version("safetensors"),
        numpy_version=version("numpy"),
        loadbench_version=version("loadbench"),
        allocator_env=allocator_env(),
        command=redact(list(sys.argv if argv is None else argv)),
        git_commit=git_commit(),
    )
