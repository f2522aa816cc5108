"""Coverage-guided differential fuzzing of the header reader (atheris, i.e. libFuzzer for Python).

Each input goes to `tests.fuzz.differential.compare`: a disagreement with safetensors that no row of
`DELIBERATE_DIFFERENCES` explains, or any exception other than the loader's `CheckpointError`,
stops the campaign and libFuzzer saves the input (`crash-<sha1>`) for a regression test. Coverage
is collected over the `loader` package only.

Usage (what `make fuzz` runs):
    python -m tests.fuzz.campaign -runs=100000 -max_len=4096 \
        -dict=tests/fuzz/header.dict WORK_CORPUS tests/fuzz_corpus
"""

from __future__ import annotations

import collections
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["loader"]):
    from tests.fuzz import differential
from tests.fuzz import mutators  # noqa: E402

COUNTS: collections.Counter[str] = collections.Counter()
FOLDER = Path(tempfile.mkdtemp(prefix="loadbench-fuzz-"))


class Disagreement(AssertionError):
    """The loader and safetensors read one input differently, and no table row says why."""


def test_one_input(data: bytes) -> None:
    verdict = differential.compare(data, FOLDER)
    COUNTS["inputs"] += 1
    if verdict.finding:
        COUNTS["disagreements"] += 1
        raise Disagreement(verdict.finding)
    if verdict.deliberate:
        COUNTS[f"deliberate:{verdict.deliberate}"] += 1
    else:
        COUNTS["accepted by both" if verdict.ours.accepted else "refused by both"] += 1
    if COUNTS["inputs"] in (RUNS, 100_000) or COUNTS["inputs"] % 20_000 == 0:
        _report()  # libFuzzer exits from C, past Python's atexit


def _report() -> None:
    parts = ", ".join(f"{k} {v}" for k, v in sorted(COUNTS.items()) if k != "inputs")
    print(f"\nfuzz(differential): {COUNTS['inputs']} inputs compared: {parts}", file=sys.stderr)


def _runs(argv: list[str]) -> int:
    return next((int(a.split("=", 1)[1]) for a in argv if a.startswith("-runs=")), -1)


RUNS = _runs(sys.argv)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input, custom_mutator=mutators.mutate)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
