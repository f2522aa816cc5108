"""Malformed quantized headers (`tests.fuzz.quantized`): 10,000 inputs through the header parser
(against safetensors' own) and the quantized layouts' checks, in a few seconds. Every input is
accepted and dequantized to the planned shape, or refused by a `CheckpointError` naming the
tensor at fault; nothing else happens (`make fuzz`'s coverage-guided campaign runs the parser
alone; this runs the layouts on top of it)."""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest

from tests.fuzz.quantized import SEEDS, judge, mutate

INPUTS = int(os.environ.get("LOADBENCH_FUZZ_QUANT_INPUTS", "10000"))


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_every_seed_is_accepted(name):
    layout, entries = SEEDS[name]
    assert judge(layout, entries, 0, random.Random(0)).accepted


def test_malformed_quantized_headers_are_refused_by_name():
    rng = random.Random(74)
    names = sorted(SEEDS)
    seen: Counter[str] = Counter()
    for _ in range(INPUTS):
        layout, entries = SEEDS[rng.choice(names)]
        mutated, extra = mutate(entries, rng)
        if rng.random() < 0.3:  # a second mistake on top of the first
            mutated, more = mutate(mutated, rng)
            extra += more
        outcome = judge(layout, mutated, extra, rng)  # raises on a crash or a nameless refusal
        if outcome.accepted:
            seen["accepted"] += 1
        elif "does not" in outcome.error or "must be" in outcome.error:
            seen["refused by the layout"] += 1
        else:
            seen["refused"] += 1
    assert sum(seen.values()) == INPUTS
    assert min(seen.values()) > INPUTS // 50, seen  # each kind of outcome is exercised
