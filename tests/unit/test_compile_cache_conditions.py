"""`--compile --compile-cache DIR`: a cold and a warm compile cache are two conditions (issue 73,
item 5). The first start compiles (the cache misses), the later starts read the forward from the
cache (hits): the summary gives each its own row and table, never one median of both."""

from __future__ import annotations

from pathlib import Path

from bench.analysis.summary import json_decisions, json_summary, tables
from bench.records.results import Results, read_results
from bench.records.schema import to_json_line
from bench.vocabulary import COMPILE_CACHE_WORDS, HIT, MISS
from tests.records import run_record, total_row


def _results(folder: Path, caches: list[str | None], ready: list[float]) -> Results:
    """One strategy's repeats of a port with `--compile`, each its cache result and ready time."""
    rows = [
        total_row(
            run_id="r1",
            model="port",
            repeat=i,
            wall_s=s,
            load_s=1.0,
            ready_s=s,
            compile_cache=cache,
        )
        for i, (cache, s) in enumerate(zip(caches, ready, strict=True))
    ]
    (folder / "here").mkdir(parents=True)
    lines = [to_json_line(r) + "\n" for r in [run_record(run_id="r1"), *rows]]
    (folder / "here" / "r1.jsonl").write_text("".join(lines), encoding="utf-8")
    return read_results(folder)


def test_a_cold_and_a_warm_cache_are_two_rows_with_their_own_medians(tmp_path):
    results = _results(tmp_path, [MISS, HIT, HIT, HIT], [14.7, 5.8, 5.9, 6.0])
    rows = {r["compile_cache"]: r for r in json_summary(results)}
    assert set(rows) == {MISS, HIT}
    assert rows[MISS]["ready_s"] == 14.7 and rows[MISS]["ok_repeats"] == 1
    assert rows[HIT]["ready_s"] == 5.9 and rows[HIT]["ok_repeats"] == 3
    text = tables(results)
    for cache in (MISS, HIT):
        assert text.count(COMPILE_CACHE_WORDS[cache]) == 1, text
    assert sorted(d["compile_cache"] for d in json_decisions(results)) == [HIT, MISS]


def test_without_a_cache_nothing_is_split_or_named(tmp_path):
    results = _results(tmp_path, [None, None], [2.0, 2.1])
    (row,) = json_summary(results)
    assert row["ok_repeats"] == 2
    assert not any(word in tables(results) for word in COMPILE_CACHE_WORDS.values())
