"""`bench.run.ranks` without a launcher: rank 0's wait for the other ranks' outcomes is bounded,
an outcome another rank wrote is merged as it is, and a follower ends when rank 0 does."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from bench.errors import BenchError
from bench.records.wire import Backend, ChildResult, to_json
from bench.run import ranks
from bench.run.ranks import Leader, Ticket, follow, launch_folder, ranked_processes
from bench.vocabulary import CRASHED, OK, TIMEOUT
from loader.launcher import OMPI, Launcher

TWO = Launcher(OMPI, rank=0, size=2, job="85655552")


def _leader(tmp_path: Path, grace_s: float = 0.0) -> tuple[Leader, Ticket]:
    leader = Leader(TWO, tmp_path / "res", grace_s=grace_s)
    leader.folder.mkdir(parents=True)
    outs = [str(tmp_path / f"r-p{r}.json") for r in range(2)]
    return leader, Ticket(0, str(tmp_path / "t.task.json"), outs, 1, 0.2, None)


@pytest.mark.timeout(20)
def test_a_rank_that_writes_nothing_becomes_a_timeout_not_a_hang(tmp_path):
    leader, ticket = _leader(tmp_path)
    started = time.monotonic()
    outcome = leader._gather(ticket, 1, deadline=started + ticket.timeout_s)
    assert time.monotonic() - started < 5
    assert outcome.status == TIMEOUT and outcome.result is None
    assert "rank 1 of 2 (ompi) wrote no outcome" in outcome.error
    assert "--out must be on storage every rank sees" in outcome.error


def test_another_ranks_outcome_and_result_are_merged_as_written(tmp_path):
    leader, ticket = _leader(tmp_path)
    result = ChildResult(CRASHED, "boom", backend=Backend(1, 2, 2, 1, "cpu"))
    Path(ticket.outs[1]).write_text(to_json(result), encoding="utf-8")
    ranks._write_outcome(leader.folder, 0, 1, ranks.ChildOutcome(CRASHED, "boom", None))
    outcome = leader._gather(ticket, 1, deadline=time.monotonic() + 5)
    assert (outcome.status, outcome.error) == (CRASHED, "boom")
    assert outcome.result is not None and outcome.result.backend.process_index == 1


def test_a_failed_peer_stops_the_others_and_an_ok_one_does_not(tmp_path):
    folder = tmp_path / "launch"
    folder.mkdir()
    ranks._write_outcome(folder, 3, 0, ranks.ChildOutcome(OK, None, None))
    assert ranks._peer_failure(folder, 3, 1, TWO) is None
    ranks._write_outcome(folder, 3, 0, ranks.ChildOutcome(CRASHED, "exit status 3\ntail", None))
    why = ranks._peer_failure(folder, 3, 1, TWO)
    assert why == "killed: rank 0 of the ompi job failed (crashed: exit status 3)"
    assert ranks._peer_failure(folder, 3, 0, TWO) is None  # its own outcome is no peer's


def test_a_follower_ends_when_rank_0_says_the_run_is_over(tmp_path):
    follower = Launcher(OMPI, rank=1, size=2, job="85655552")
    folder = launch_folder(tmp_path, follower)
    folder.mkdir(parents=True)
    (folder / ranks.DONE).write_text(json.dumps({"tasks": 0}))
    assert follow(follower, tmp_path, silence_s=5) == 0
    assert (folder / "bye-p1").is_file()


@pytest.mark.timeout(20)
def test_a_follower_gives_up_on_a_silent_rank_0(tmp_path, capsys):
    follower = Launcher(OMPI, rank=1, size=2, job="85655552")
    assert follow(follower, tmp_path, silence_s=0.3) == 1
    assert "rank 0 showed no sign of life" in capsys.readouterr().err


def test_the_launcher_decides_the_process_count():
    four = Launcher(OMPI, 0, 4, "j")
    assert ranked_processes(None, four) == [4] == ranked_processes([4], four)
    with pytest.raises(BenchError, match="launched as 4 ranks by ompi.*drop --processes"):
        ranked_processes([2], four)
