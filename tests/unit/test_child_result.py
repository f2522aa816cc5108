"""The child's result record: a round trip, and every way it can be unreadable becomes a row."""

from __future__ import annotations

import json
import sys

import pytest

from bench import strategies
from bench.errors import ChildResultError
from bench.limits.disk_read import ThrottleOutcome
from bench.limits.memory import LimitOutcome
from bench.limits.pagecache import CacheOutcome
from bench.limits.situation import Situation
from bench.records.schema import PhaseRecord
from bench.records.wire import (
    CHILD_RESULT_VERSION,
    VERSION_KEY,
    Backend,
    ChildResult,
    ChildTask,
    Measurement,
    PhaseMeasure,
    Sample,
    from_json,
    to_json,
)
from bench.run.children import ChildOutcome, run_group
from bench.run.matrix import Checkpoint, Task
from bench.run.rows import RowContext, result_records

GiB = 1 << 30


def _result() -> ChildResult:
    read = PhaseMeasure("read", 0, 0.5, 3 * GiB, 2 * GiB, GiB, GiB, {"pread": 0.25})
    total = PhaseMeasure("total", 1, 0.6, 3 * GiB, 2 * GiB, GiB, GiB)
    measured = Measurement(GiB, "hwm", total, (read,), (Sample(0.1, "read", GiB, 0),))
    return ChildResult("ok", None, Backend(0, 1, 8, 8), measured, tensors_verified=3)


def test_round_trip_keeps_every_field():
    result = _result()
    assert from_json(ChildResult, to_json(result), source="r.json") == result
    task = ChildTask("eager", "gpt2", "/c/model.safetensors", "/c/model.safetensors", "bfloat16")
    assert from_json(ChildTask, to_json(task), source="t.json") == task


def _stamped(obj: dict, version: object = CHILD_RESULT_VERSION) -> str:
    return json.dumps({VERSION_KEY: version, **obj})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "r.json: not JSON"),
        (
            _stamped({"status": "ok"}, version=0),
            f"version 0, this bench reads version {CHILD_RESULT_VERSION}",
        ),
        (json.dumps({"status": "ok"}), "version None"),
        (_stamped({"error": None}), "missing field(s) ['status']"),
        (_stamped({"status": "ok", "peak": 3}), "unknown field(s) ['peak']"),
        (_stamped({"status": "ok", "tensors_verified": "3"}), "tensors_verified: expected int"),
        (_stamped({"status": "fine"}), "status 'fine' is not one of ok, wrong, crashed"),
        (_stamped({"status": "ok", "backend": {"devices": 1.5}}), "backend.devices: expected int"),
    ],
)
def test_unreadable_results_name_the_file_and_the_field(text, message):
    with pytest.raises(ChildResultError, match="r.json") as err:
        from_json(ChildResult, text, source="r.json")
    assert message in str(err.value)


def _write_and_exit(out, text: str) -> list[str]:
    code = f"open({str(out)!r}, 'w').write({text!r})"
    return [sys.executable, "-c", code]


def test_a_child_of_another_version_becomes_a_crashed_row(tmp_path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    stale = json.loads(to_json(_result()))
    stale[VERSION_KEY] = CHILD_RESULT_VERSION + 1
    argvs = [_write_and_exit(good, to_json(_result())), _write_and_exit(bad, json.dumps(stale))]
    outcomes = run_group(argvs, [{}, {}], [good, bad], timeout_s=60, memory_bytes=8 * GiB)
    assert [o.status for o in outcomes] == ["ok", "crashed"]
    assert outcomes[0].result == _result()
    assert (
        "bad.json" in outcomes[1].error
        and f"version {CHILD_RESULT_VERSION + 1}, this bench reads version {CHILD_RESULT_VERSION}"
        in outcomes[1].error
    )
    checkpoint = Checkpoint("gpt2", None, 0, "/c/model.safetensors", GiB, GiB, 3)
    task = Task(checkpoint, strategies.catalog()["eager"], repeat=0, processes=1, devices=8)
    ctx = RowContext("run", "rid", task, Situation(CacheOutcome("warm")))
    (row,) = result_records(ctx, outcomes[1:])
    assert (row.phase, row.status, row.peak_rss_bytes) == ("total", "crashed", None)
    assert (row.shapes, row.strategy, row.kind, row.dtype, row.devices) == (
        "gpt2",
        "eager",
        "strategy",
        "native",
        8,
    )
    assert (row.cache, row.host_ram_bytes, row.disk_read_limit) == ("warm", None, None)
    rows = result_records(ctx, outcomes[:1])
    assert [r.phase for r in rows[:2]] == ["read", "total"] and rows[0].substeps_s == {
        "pread": 0.25
    }


def test_each_limit_writes_its_own_fields_into_every_row():
    """The situation's parts land field by field: the cache, the memory limit, the read cap."""
    memory = LimitOutcome("cgroup-v2", True, 4 * GiB, oom_kills=0, cgroup_peak_bytes=3 * GiB)
    disk = ThrottleOutcome("none", False, 300_000_000, (), note="on no block device")
    situation = Situation(CacheOutcome("cold", 0.25), memory, disk)
    assert situation.notes() == ["on no block device"]
    checkpoint = Checkpoint("gpt2", "bfloat16", 0, "/c/model.safetensors", GiB, GiB, 3)
    task = Task(checkpoint, strategies.catalog()["eager"], repeat=2, processes=1, devices=8)
    ctx = RowContext("run", "rid", task, situation)
    outcomes = [ChildOutcome("crashed", "boom", None), ChildOutcome("ok", None, _result())]
    rows = [r for o in outcomes for r in result_records(ctx, [o]) if isinstance(r, PhaseRecord)]
    assert [(r.phase, r.status) for r in rows] == [
        ("total", "crashed"),
        ("read", "ok"),
        ("total", "ok"),
    ]
    for row in rows:
        assert (row.cache, row.resident_fraction, row.dtype, row.repeat) == (
            "cold",
            0.25,
            "bfloat16",
            2,
        )
        assert (row.host_ram_bytes, row.memory_limit, row.memory_limit_enforced) == (
            4 * GiB,
            "cgroup-v2",
            True,
        )
        assert row.cgroup_peak_bytes == 3 * GiB
        assert (row.disk_read_bytes_per_s, row.disk_read_limit) == (300_000_000, "none")
        assert row.disk_read_limit_enforced is False
    assert rows[1].phase_wall_s == 0.5 and rows[2].peak_rss_bytes == 3 * GiB


def test_a_port_is_loaded_with_its_architectures_declared_ignores(monkeypatch):
    """`bench run --model port`: the keys the architecture declares its files hold beyond the
    port (GPT-2's stored lm_head, say) are ignored as declared, not warned about on every row;
    the load goes through `load_model`'s own entry (`StrategyInfo.run`)."""
    from types import SimpleNamespace

    from bench.child import worker
    from bench.records.wire import ChildTask
    from loader import strategies
    from loader.planning.policy import LoadPolicy

    given: list = []

    def recording(self, request):
        given.append(request)
        return "model", "report"

    monkeypatch.setattr(strategies.StrategyInfo, "run", recording)
    port = SimpleNamespace(ignore_unexpected=("lm_head.weight",), ignore_missing=())
    task = ChildTask("hostcast", "tiny-gpt2", "ck.safetensors", "ck.safetensors")
    info = strategies.get("hostcast")
    worker._load(task, info, (object(), {"a": "b"}, port), probe=None)
    (request,) = given
    assert request.args.policy == LoadPolicy.of(ignore_unexpected=("lm_head.weight",))
    assert request.args.key_map == {"a": "b"} and request.args.strict is False
