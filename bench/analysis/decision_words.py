"""The judge's decision (`bench.analysis.judge.Decision`) in words: the one sentence every
surface prints of it, the bench summary's `use X` line, `recommend`'s answer (text and `--json`),
`bench run --json`, the dashboard's Overview and Target host pages and the report.

The sentence names the pick and the host, the measure ranked, how many fit, and why: called
apart from the runner-up (`1.47x faster (95% CI 1.44-1.50)`: the one rule for "different?",
`bench.analysis.difference`, in its own words), or tied on time (the 95% interval of their
ratio holds 1) and then the lightest of the tied (beyond their repeat spreads, or by median
only: it says which); "one run: not judged on time" for a candidate without an interval; a peer
(another project's loader) that wins with what it costs, then the best of loadbench's own; and
last the reasons the pick may not hold: the unstable candidates, the limits the rows ran under,
a partial run. No jax.
"""

from __future__ import annotations

from typing import Any

from bench.analysis.judge import (
    PAIRED,
    PREDICTED,
    TIGHT_FRACTION,
    WALL,
    Candidate,
    Decision,
    time_difference,
)
from shapes.sizes import format_bytes

ONE_RUN = "one run: not judged on time"
PEER_TEXT = "a peer (another project's loader)"
MEASURE_WORDS = {
    PAIRED: "x ceiling, the wall over a bare copy timed beside each repeat",
    WALL: "median wall time",
    PREDICTED: "predicted time",
}
#: Said after the wall-time measure where the rows' paired ratios were the wider measure.
PAIRED_WIDER = (
    " (not x ceiling: its intervals were wider, the bare copy timed beside each repeat moved more "
    "than the loads)"
)
#: Each measure's short name, as a table's reason names it.
MEASURE_NAMES = {PAIRED: "x ceiling", WALL: "median wall time", PREDICTED: "predicted time"}
#: What to do about an unstable time, said with the names of the candidates that are.
UNSTABLE_ADVICE = "their times are no verdict: add repeats or run on a quieter machine"


def time_text(c: Candidate, measure: str) -> str:
    """`1.31 s; 2.36x ceiling, 95% CI 2.28-2.45x` (the paired ratio), `1.31 s, 95% CI
    1.20-1.44 s` (a wall or predicted time), or `1.31 s, 1 run` (no interval)."""
    if c.time is None or c.time.n < 2:
        return f"{c.seconds:.2f} s, 1 run"
    if measure == PAIRED:
        return (
            f"{c.seconds:.2f} s; {c.time.estimate:.2f}x ceiling, "
            f"95% CI {c.time.low:.2f}-{c.time.high:.2f}x"
        )
    return f"{c.seconds:.2f} s, 95% CI {c.time.low:.2f}-{c.time.high:.2f} s"


def costs_text(c: Candidate) -> str:
    """`2.29 GiB host RAM peak and 2.12 GiB device peak` (the device's where known)."""
    device = c.device_peak_bytes
    also = f" and {format_bytes(device)} device peak" if device is not None else ""
    return f"{format_bytes(c.peak_bytes)} host RAM peak{also}"


def _use(c: Candidate) -> str:
    """`use pipelined (858 MiB peak)`, with its device peak where known."""
    device = c.device_peak_bytes
    also = f", {format_bytes(device)} device peak" if device is not None else ""
    return f"use {c.strategy} ({format_bytes(c.peak_bytes)} peak{also})"


def _named(c: Candidate, measure: str) -> str:
    return f"{c.strategy} ({time_text(c, measure)})"


def why(d: Decision, own: bool = False) -> str:
    """Why the pick, with its figures: called apart from the runner-up, or tied (or not judged
    on time) and then the lightest of them; `own`: `d` weighs loadbench's own strategies only."""
    best = d.picked
    assert best is not None
    head = _named(best, d.measure)
    others = [c for c in d.weighed if c is not best]
    if not others:
        runner = d.candidate(d.runner_up)
        if runner is None:
            of_them = " of them" if own else ""
            return f"{head} is the only one{of_them} {'measured' if d.alone else 'that fits'}"
        apart = time_difference(runner, best).text()
        return f"{head} is faster than {_named(runner, d.measure)}: {apart}"
    said = []
    tied = [c for c in others if c.strategy in d.tied]
    unjudged = [c for c in others if c.strategy in d.unjudged]
    if tied:
        said.append(_ties(best, tied, d.measure))
    if unjudged:
        names = ", ".join(_named(c, d.measure) for c in unjudged)
        said.append(f"against {names}: {ONE_RUN}")
    how = "" if d.judged_on_time else ", so it is named on memory"
    if d.lighter_beyond:
        peaks = ", ".join(format_bytes(c.peak_bytes) for c in others)
        light = (
            f"{best.strategy} is the lightest ({format_bytes(best.peak_bytes)} against {peaks}), "
            f"beyond their repeat spreads{how}"
        )
    else:
        light = _lightest(d)
    return f"{head} " + "; ".join([*said, light])


def _ties(best: Candidate, tied: list[Candidate], measure: str) -> str:
    """`ties on time with hostcast (...): the 95% interval of their ratio holds 1 (hostcast
    0.98x, 95% CI 0.93-1.03)`: each tied one's time over the pick's, by the one rule."""
    names = ", ".join(_named(c, measure) for c in tied)
    ratios = []
    for c in tied:
        found = time_difference(best, c)
        ratios.append(f"{c.strategy} {found.ratio:.2f}x, 95% CI {found.low:.2f}-{found.high:.2f}")
    which = "the 95% interval of their ratio" if len(tied) == 1 else "each ratio's 95% interval"
    return f"ties on time with {names}: {which} holds 1 ({'; '.join(ratios)})"


def _lightest(d: Decision) -> str:
    """`pipelined is the fastest of the lightest (pipelined 758 MiB, zerocopy 757 MiB: within
    their repeat spreads; heavier: mmap-put 1.25 GiB)`: no one peak is lighter than all the
    others beyond the spreads."""
    light = [c for c in d.weighed if c.strategy in d.lightest]
    heavy = [c for c in d.weighed if c.strategy not in d.lightest]
    named = ", ".join(f"{c.strategy} {format_bytes(c.peak_bytes)}" for c in light)
    text = f"{d.pick} is the fastest of the lightest ({named}: within their repeat spreads"
    if heavy:
        text += "; heavier: " + ", ".join(
            f"{c.strategy} {format_bytes(c.peak_bytes)}" for c in heavy
        )
    how = "" if d.judged_on_time else "; time was not judged"
    return text + how + ")"


def _host(d: Decision) -> str:
    ram = format_bytes(d.host.ram_bytes)
    n = d.host.devices
    return ram if n is None else f"{ram}, {n} device{'' if n == 1 else 's'}"


def _basis(d: Decision) -> str:
    n = len(d.candidates)
    why = PAIRED_WIDER if d.paired_wider else ""
    return (
        f"ranked by {MEASURE_WORDS[d.measure]}{why}; {n} "
        f"fit{'s' if n == 1 else ''} with {TIGHT_FRACTION:.0%} to spare"
    )


def _caveats(d: Decision) -> str:
    said = ""
    if d.unstable:
        said += f"; unstable: {', '.join(d.unstable)} ({UNSTABLE_ADVICE})"
    if d.limits:
        said += f"; measured under {', '.join(d.limits)}, not on an unconstrained host"
    if d.partial:
        said += f"; answered from part of a run ({'; '.join(d.partial)})"
    return said


def sentence(d: Decision) -> str:
    """The one sentence every surface prints of `d`.

    Example:
        >>> sentence(decision)
        'use zerocopy on 16.0 GiB, 1 device (ranked by x ceiling (...), among the 3 ...): ...'
    """
    if d.host.ram_bytes is None:
        return "no run record: this host's RAM is unknown, so no strategy is named" + _caveats(d)
    if not d.loaded_ok:
        return "no strategy loaded a model ok here, so none is named" + _caveats(d)
    best = d.picked
    if best is None:
        return f"no strategy fits {_host(d)}, with {TIGHT_FRACTION:.0%} to spare" + _caveats(d)
    if not best.peer:
        return f"{_use(best)} on {_host(d)} ({_basis(d)}): {why(d)}{_caveats(d)}"
    text = (
        f"{best.strategy}, {PEER_TEXT}, is the pick on {_host(d)} ({_basis(d)}): {why(d)}; "
        f"it costs {costs_text(best)}"
    )
    own = d.own.picked if d.own is not None else None
    if d.own is None or own is None:
        return f"{text}; none of loadbench's own strategies fits{_caveats(d)}"
    return (
        f"{text}; of loadbench's own strategies, {_use(own)}: {why(d.own, own=True)}{_caveats(d)}"
    )


def to_use(d: Decision) -> str | None:
    """The strategy to use in one's own code: the pick, or loadbench's best beside a peer."""
    best = d.picked
    if best is not None and best.peer:
        return d.own.pick if d.own is not None else None
    return d.pick


def decision_json(d: Decision) -> dict[str, Any]:
    """`d.to_json()` with its sentence (`sentence`), as the JSON surfaces print it."""
    return {**d.to_json(), "sentence": sentence(d)}
