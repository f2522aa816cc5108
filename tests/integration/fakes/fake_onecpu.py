"""Test fake: fails unless the kernel gives its process exactly one CPU (`bench run --cpus 1`)."""

from bench.machine import limits

KIND = "reference"


def load(request):
    with request.probe.phase("read"):
        cpus = limits.read().effective_cpus
    if cpus != 1:
        raise RuntimeError(f"this child may use {cpus} CPUs, not 1")
    return None, None
