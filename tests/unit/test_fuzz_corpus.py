"""Replay the differential-fuzzing corpus (`tests/fuzz_corpus/`) against safetensors 0.8.0.

Every file is one fuzz input (see `tests.fuzz.differential.decode_input`): named `seed-*` files
are hand-written cases (each disagreement the campaign found is one), the rest are inputs
`make fuzz` kept because they reached new code. Each must be read the same by the loader and by
`safetensors.safe_open`, or be explained by a row of `DELIBERATE_DIFFERENCES`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.differential import DELIBERATE_DIFFERENCES, compare

CORPUS = Path(__file__).resolve().parents[1] / "fuzz_corpus"
FILES = sorted(p for p in CORPUS.iterdir() if p.is_file() and not p.name.startswith("README"))


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("corpus")
    return {p.name: compare(p.read_bytes(), folder) for p in FILES}


def test_corpus_is_small_and_present():
    assert len(FILES) >= 40
    assert all(p.stat().st_size <= 4096 for p in FILES)


@pytest.mark.parametrize("name", [p.name for p in FILES])
def test_loader_agrees_with_safetensors(verdicts, name):
    verdict = verdicts[name]
    assert verdict.finding is None, f"{name}: {verdict.finding}"


def test_every_deliberate_difference_is_exercised(verdicts):
    seen = {v.deliberate for v in verdicts.values()}
    assert {row.name for row in DELIBERATE_DIFFERENCES} <= seen


@pytest.mark.parametrize(
    "name, accepted",
    [
        ("seed-raw-header-640-bytes", True),  # begins 80 02: once refused as a "pickle"
        ("seed-surrogate-pair-name", True),
        ("seed-depth-127", True),
        ("seed-depth-128", False),
        ("seed-lone-surrogate-name", False),
        ("seed-nan-in-ignored-field", False),
        ("seed-float-out-of-range", False),
        ("seed-negative-zero-dim", False),
        ("seed-shape-overflow-before-0", False),
        ("seed-shape-dim-2pow64-times-0", False),
    ],
)
def test_fixed_disagreements_stay_fixed(verdicts, name, accepted):
    assert verdicts[name].ours.accepted is accepted, verdicts[name].ours.error
