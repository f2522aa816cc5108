"""The bench passes each strategy only the options it declares (`OPTIONS`): the others it runs,
and is recorded, without, said once before the run; a task that still carries one is refused by
the strategy in one line, a row of its own, never a crashed run."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bench.child import worker
from bench.records.wire import ChildTask
from bench.run.config import RunConfig
from bench.run.matrix import Checkpoint, plan, untaken_options
from bench.vocabulary import CRASHED
from loader import strategies
from loader.options import LoadOptions
from loader.sequence import LoadRequest


def test_each_task_carries_only_the_options_its_strategy_takes(tmp_path):
    config = RunConfig(
        ["tiny-gpt2"],
        strategies=["pipelined", "hostcast"],
        options=LoadOptions.of(budget=1 << 20, staging=True, threads=2, cache_policy="keep"),
        out=tmp_path,
        memory_budget_bytes=1 << 40,
    )
    entries = [strategies.get("pipelined"), strategies.get("hostcast")]
    ck = Checkpoint("tiny-gpt2", None, 0, str(tmp_path / "model.safetensors"), 1, 1, 1)
    tasks, skipped = plan(ck, entries, config, tmp_path)
    by_name = {t.entry.name: t for t in tasks}
    assert not skipped and set(by_name) == {"pipelined", "hostcast"}
    assert by_name["pipelined"].options == config.options
    assert by_name["hostcast"].options.given() == {}
    assert untaken_options(config, entries) == [
        f"{flag}: taken by pipelined only; hostcast runs without it"
        for flag in ("--budget", "--threads", "--cache-policy", "--staging")
    ]
    assert untaken_options(config, entries[:1]) == []


def test_share_reaches_the_sharded_task_only(tmp_path):
    config = RunConfig(
        ["tiny-gpt2"],
        strategies=["sharded", "pipelined"],
        options=LoadOptions.of(share="bytes"),
        out=tmp_path,
        memory_budget_bytes=1 << 40,
    )
    entries = [strategies.get("sharded"), strategies.get("pipelined")]
    ck = Checkpoint("tiny-gpt2", None, 0, str(tmp_path / "model.safetensors"), 1, 1, 1)
    tasks, _ = plan(ck, entries, config, tmp_path)
    shares = {t.entry.name: t.options.sharing.share for t in tasks}
    assert shares == {"sharded": "bytes", "pipelined": None}
    assert untaken_options(config, entries) == [
        "--share: taken by sharded only; pipelined runs without it"
    ]


def test_a_task_with_an_option_its_strategy_does_not_take_is_a_one_line_row():
    task = ChildTask(
        "hostcast", "tiny-gpt2", "/nowhere", "/nowhere", None, options={"budget": 1 << 20}
    )
    result = worker.run(task)
    assert result.status == CRASHED
    assert result.error is not None and "\n" not in result.error
    assert "takes no option 'budget'" in result.error and "pipelined" in result.error


def test_a_remote_run_without_a_concurrency_gives_every_strategy_the_loaders_default(tmp_path):
    """runai's S3 streamer would run its own 8 clients, pipelined 16: each its own configuration,
    never in one block; so the bench gives both the loader's default."""
    from loader.remote import DEFAULT_CONCURRENCY

    names = ["pipelined", "runai-s3"]
    config = RunConfig(["tiny-gpt2"], strategies=names, source="s3", out=tmp_path)
    entries = [strategies.get(n) for n in names]
    ck = Checkpoint("tiny-gpt2", None, 0, str(tmp_path / "model.safetensors"), 1, 1, 1)
    tasks, _ = plan(ck, entries, config, tmp_path)
    assert {t.entry.name for t in tasks} >= {"pipelined"}
    assert {t.options.remote.concurrency for t in tasks} == {DEFAULT_CONCURRENCY}
    swept = {"concurrency": [1, 64]}
    config = RunConfig(["tiny-gpt2"], strategies=names, source="s3", out=tmp_path, swept=swept)
    tasks, _ = plan(ck, entries, config, tmp_path)
    assert sorted({t.options.remote.concurrency for t in tasks}) == [1, 64]


def test_a_one_process_peer_gets_a_skipped_row_per_process_count_saying_why(tmp_path):
    """`--processes 2,4`: runai runs as one process and its 2- and 4-process rows are skipped,
    saying its distributed mode needs NCCL; orbax-safetensors runs at every count, like sharded;
    a strategy with no such reason (eager) gets no extra row."""
    names = ["runai", "orbax-safetensors", "sharded", "eager"]
    config = RunConfig(
        ["tiny-gpt2"], strategies=names, processes=[1, 2, 4], devices=4, out=tmp_path
    )
    entries = [strategies.get(n) for n in names]
    ck = Checkpoint("tiny-gpt2", None, 0, str(tmp_path / "model.safetensors"), 1, 1, 1)
    tasks, skipped = plan(ck, entries, config, tmp_path)
    counts = lambda name: sorted({t.processes for t in tasks if t.entry.name == name})  # noqa: E731
    assert counts("orbax-safetensors") == counts("sharded") == [1, 2, 4]
    assert counts("eager") == [1] and not [t for t, _ in skipped if t.entry.name == "eager"]
    runai = {t.processes: why for t, why in skipped if t.entry.name == "runai"}
    assert sorted(runai) == ([2, 4] if counts("runai") else [1, 2, 4])  # [1]: not installed
    for procs in (2, 4):
        assert runai[procs].startswith("runai's distributed mode needs NCCL on CUDA or ROCm")


def test_a_remote_run_says_why_orbax_safetensors_reads_local_files_only(tmp_path):
    names = ["orbax-safetensors", "eager", "sharded"]
    config = RunConfig(["tiny-gpt2"], strategies=names, source="http", processes=[2], out=tmp_path)
    entries = [strategies.get(n) for n in names]
    ck = Checkpoint("tiny-gpt2", None, 0, str(tmp_path / "model.safetensors"), 1, 1, 1)
    tasks, skipped = plan(ck, entries, config, tmp_path)
    assert {t.entry.name for t in tasks} == {"sharded"}
    why = {t.entry.name: reason for t, reason in skipped}
    assert why["eager"] == "reads local files only (--source http)"
    assert why["orbax-safetensors"].startswith("reads local files only (--source http): orbax's")
    assert "etils epath: no http(s)://" in why["orbax-safetensors"]


def test_without_processes_the_multi_process_peer_runs_as_one_and_sharded_as_two(tmp_path):
    names = ["orbax-safetensors", "sharded"]
    config = RunConfig(["tiny-gpt2"], strategies=names, devices=4, out=tmp_path)
    ck = Checkpoint("tiny-gpt2", None, 0, str(tmp_path / "model.safetensors"), 1, 1, 1)
    tasks, _ = plan(ck, [strategies.get(n) for n in names], config, tmp_path)
    layouts = {(t.entry.name, t.processes, t.devices) for t in tasks}
    assert layouts == {("orbax-safetensors", 1, 4), ("sharded", 2, 4)}


def test_the_strategys_modules_are_imported_before_the_clock(monkeypatch):
    """A lazy import inside the timed load would be counted as loading (0.06 s of sa3's load
    for pipelined's modules on the CPU VM): the child imports them in its `target` step."""
    events: list[str] = []
    real_import = strategies.StrategyInfo._import

    def counted_import(self):
        events.append("import")
        return real_import(self)

    def no_load(task, info, target, probe):
        events.append("load")
        raise RuntimeError("the clock would start here")

    monkeypatch.setattr(strategies.StrategyInfo, "_import", counted_import)
    monkeypatch.setattr(worker, "_load", no_load)
    result = worker.run(ChildTask("pipelined", "tiny-gpt2", "/nowhere", "/nowhere"))
    assert result.status == CRASHED and "the clock would start here" in (result.error or "")
    assert events[:2] == ["import", "load"]


class _Asked(Exception):
    """Raised where a strategy would start reading: the request it was asked for is caught."""


def _request_asked(monkeypatch, load: Callable[[], object]) -> LoadRequest:
    """The `LoadRequest` a strategy is entered with when `load()` runs (nothing is read)."""
    asked: list[LoadRequest] = []

    def caught(self, request):
        asked.append(request)
        raise _Asked

    monkeypatch.setattr(strategies.StrategyInfo, "checked", caught)
    load()
    (request,) = asked
    return request


@pytest.mark.parametrize("options", [{}, {"budget": 1 << 20, "threads": 2, "staging": True}])
def test_the_child_enters_the_strategy_with_the_request_load_model_makes(monkeypatch, options):
    """The bench measures a user's load: the child's request carries the options `load_model`
    resolves from the same keywords (none given: none, so the engine takes its own defaults),
    and the same arguments, so a child that passed defaults of its own, or other ones, fails."""
    import loader
    import shapes

    task = ChildTask("pipelined", "tiny-gpt2", "/nowhere", "/nowhere", options=options)
    child = _request_asked(monkeypatch, lambda: worker.run(task))

    def users_load():
        with pytest.raises(_Asked):
            loader.load_model(shapes.model_builder("tiny-gpt2"), "/nowhere", **options)

    user = _request_asked(monkeypatch, users_load)
    assert child.options == user.options
    assert child.options.given() == options
    assert child.args == user.args
    assert str(child.path) == str(user.path)
