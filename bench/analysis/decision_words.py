"""The judge's decision (`bench.analysis.judge.Decision`) in words: the one sentence every
surface prints of it, the bench summary's `use X` line, `recommend`'s answer (text and `--json`),
`bench run --json`, the dashboard's Overview and Target host pages and the report.

The sentence is written for a person, in two parts and at most `MAX_SENTENCE` (300) characters:

- **What to use and what it costs**, at most `MAX_FIRST` (120) characters: `use pipelined on
  16.0 GiB, 1 device: 758 MiB peak, 0.37 s` (a peer that wins: it first, then loadbench's best).
- **How sure**, in plain words: `1.47x faster than builder` (`ahead of builder as measured`
  where either time is unstable: no speed ratio is claimed beside "no time verdict"); `ties with
  zerocopy and builder on time and peak; loadbench's default wins ties` (`judge.preference`);
  `zerocopy: one run, not judged on time`; `this machine was busy: no time verdict` (where a
  time the pick rests on is unstable); then every option or input that changed the answer: the
  limits the rows ran under (`--cpus 1`, `--budget 32MiB`, `--host-ram 4GiB`), a device count
  asked that no run used, part of a run lost.

Its figures never contradict each other: the seconds shown are the pick's median wall, and the
factor against the runner-up is the measure ranked, named in the details. Those details (each
candidate's interval, the measure ranked, the ratios of the tied, the runner-up with its
figures) are `details`: `--json`'s `details`, the tables beside. No jax.
"""

from __future__ import annotations

from typing import Any

from bench.analysis.judge import (
    HOST_BYTES_BY_DESIGN,
    PAIRED,
    PREDICTED,
    TIGHT_FRACTION,
    WALL,
    Candidate,
    Decision,
    time_difference,
)
from loader.vocabulary import DEFAULT_STRATEGY
from shapes.sizes import format_bytes

#: The most characters of the sentence's first part (what to use, what it costs) and of it all.
MAX_FIRST, MAX_SENTENCE = 120, 300
#: The most names a list in the sentence says before `and N more`.
MAX_NAMED = 2
#: What an unstable time's reason says where other processes took the CPUs
#: (`bench.intervals.instability`).
SHARED_WORDS = "other processes took"

ONE_RUN = "one run: not judged on time"
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


def _use(c: Candidate) -> str:
    """`use pipelined (858 MiB peak)`, with its device peak where known (the details' form)."""
    device = c.device_peak_bytes
    also = f", {format_bytes(device)} device peak" if device is not None else ""
    return f"use {c.strategy} ({format_bytes(c.peak_bytes)} peak{also})"


def _cost(c: Candidate) -> str:
    """`758 MiB peak, 0.37 s` (its device peak beside where known): what the pick costs."""
    device = c.device_peak_bytes
    also = f", {format_bytes(device)} on the device" if device is not None else ""
    return f"{format_bytes(c.peak_bytes)} peak{also}, {c.seconds:.2f} s"


def _named(c: Candidate, measure: str) -> str:
    return f"{c.strategy} ({time_text(c, measure)})"


def _names(names: list[str]) -> str:
    """`zerocopy`, `zerocopy and builder`, `a, b and 3 more`: at most `MAX_NAMED` named."""
    if len(names) > MAX_NAMED:
        return f"{', '.join(names[:MAX_NAMED])} and {len(names) - MAX_NAMED} more"
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def why(d: Decision, own: bool = False) -> str:
    """Why the pick, with its figures (the details): called apart from the runner-up, or tied
    (or not judged on time) and then the lightest of them, with the fixed order where several
    are as light; `own`: `d` weighs loadbench's own strategies only."""
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
            f"by the 95% interval of their peaks' ratio{how}"
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
    """`as light: pipelined 758 MiB, zerocopy 757 MiB, so a fixed order names pipelined
    (loadbench's default); heavier: mmap-put 1.25 GiB`: no one peak is lighter than all the
    others, and `judge.preference` decides among the as light."""
    light = [c for c in d.weighed if c.strategy in d.lightest]
    heavy = [c for c in d.weighed if c.strategy not in d.lightest]
    named = ", ".join(f"{c.strategy} {format_bytes(c.peak_bytes)}" for c in light)
    by = (
        f"{_order(d)} names {d.pick}"
        if any(s in d.tied for s in d.lightest)
        else f"the fastest of them is named, {d.pick}"
    )
    text = f"as light: {named}, so {by}"
    if heavy:
        text += "; heavier: " + ", ".join(
            f"{c.strategy} {format_bytes(c.peak_bytes)}" for c in heavy
        )
    how = "" if d.judged_on_time else " (time was not judged)"
    return text + how


def _deciding(d: Decision) -> str:
    """Which rule of the fixed order (`judge.preference`) named the pick among those tied on
    time and peak: `loadbench's default`, `fewest host bytes by design` or `name`."""
    if d.pick == DEFAULT_STRATEGY:
        return "loadbench's default"
    base = (d.pick or "").split(" (")[0]
    return "fewest host bytes by design" if base in HOST_BYTES_BY_DESIGN else "name"


def _order(d: Decision) -> str:
    """`the fixed order (loadbench's default first)`: the details' words for `_deciding`."""
    return f"the fixed order ({_deciding(d)} first)"


def wins(d: Decision) -> str:
    """`loadbench's default wins ties`: the sentence's and the table's words for `_deciding`."""
    return f"{_deciding(d)} wins ties"


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


def details(d: Decision) -> str:
    """Everything behind the sentence: the measure ranked, how many fit, each weighed
    candidate's figures and interval, the ratios of the tied, the runner-up, the caveats at
    length (`--json`'s `details`).

    Example:
        >>> details(decision)
        'use zerocopy (757 MiB peak) on 16.0 GiB, 1 device (ranked by x ceiling, ...): ...'
    """
    best = d.picked
    if best is None:
        return sentence(d)
    text = f"{_use(best)} on {_host(d)} ({_basis(d)}): {why(d)}"
    own = d.own.picked if d.own is not None else None
    if best.peer and d.own is not None and own is not None:
        text += f"; of loadbench's own strategies, {_use(own)}: {why(d.own, own=True)}"
    return text + _caveats(d)


def _sure(d: Decision) -> list[str]:
    """How sure the pick is, in plain words: called apart, tied (and with whom), one run."""
    best = d.picked
    assert best is not None
    others = [c for c in d.weighed if c is not best]
    if not others:
        runner = d.candidate(d.runner_up)
        if runner is None:
            return ["the only one measured" if d.alone else "the only one that fits"]
        if _shaky(d):
            return [f"ahead of {runner.strategy} as measured"]
        apart = time_difference(runner, best)
        return [f"{apart.factor:.2f}x faster than {runner.strategy}"]
    said = []
    as_light = [s for s in d.lightest if s != d.pick and s in d.tied]
    heavier = [s for s in d.tied if s not in as_light]
    if as_light:
        said.append(f"ties with {_names(as_light)} on time and peak; {wins(d)}")
    if heavier:
        said.append(f"ties on time with {_names(heavier)}, and is lighter")
    if d.unjudged:
        said.append(f"{_names(list(d.unjudged))}: one run, not judged on time")
    return said


def _shaky(d: Decision) -> tuple[Candidate, ...]:
    """The candidates the time verdict rests on (the pick, the tied, the one-run, the runner-up)
    whose time is unstable: the sentence claims no speed of them."""
    names = {d.pick, d.runner_up, *d.tied, *d.unjudged}
    return tuple(c for c in d.candidates if c.strategy in names and c.unstable)


def _busy(d: Decision) -> str | None:
    """`this machine was busy: no time verdict` where a time the pick rests on is unstable
    (`_shaky`); an unstable candidate it was not weighed against changes nothing said."""
    shaky = _shaky(d)
    if not shaky:
        return None
    shared = any(SHARED_WORDS in (c.unstable or "") for c in shaky)
    return f"{'this machine was busy' if shared else 'times unstable'}: no time verdict"


def _conditions(d: Decision) -> list[str]:
    """Every option or input that changed the answer: the limits, part of a run lost."""
    said = [f"measured under {' '.join(d.limits)}"] if d.limits else []
    if d.devices_asked is not None:
        n = d.devices_asked
        said.insert(
            0, f"no run here on {n} device{'' if n == 1 else 's'}: bench with --devices {n}"
        )
    if d.partial:
        said.append(f"partial input, lost: {_names(list(d.lost))}" if d.lost else "partial input")
    return said


def _bounded(first: str, rest: list[str]) -> str:
    """`first; rest...`, cut to `MAX_SENTENCE` characters: a part that does not fit is left to
    the details, and the sentence says so."""
    text = first
    for i, part in enumerate(rest):
        more = f"{text}; {part}"
        tail = "; more in the details" if i < len(rest) - 1 else ""
        if len(more) + len(tail) > MAX_SENTENCE:
            return f"{text}; more in the details"
        text = more
    return text


def sentence(d: Decision) -> str:
    """The one sentence every surface prints of `d` (the module doc says its parts).

    Example:
        >>> sentence(decision)
        'use pipelined on 16.0 GiB, 1 device: 758 MiB peak, 0.37 s; ties with zerocopy on ...'
    """
    conditions = _conditions(d)
    if d.host.ram_bytes is None:
        return _bounded("no run record: this host's RAM is unknown, so none is named", conditions)
    if not d.loaded_ok:
        return _bounded("no strategy loaded a model ok here, so none is named", conditions)
    best = d.picked
    if best is None:
        first = f"no strategy fits {_host(d)}, with {TIGHT_FRACTION:.0%} to spare"
        return _bounded(first, conditions)
    busy = [b] if (b := _busy(d)) else []
    if not best.peer:
        first = f"use {best.strategy} on {_host(d)}: {_cost(best)}"
        return _bounded(first, [*_sure(d), *busy, *conditions])
    first = f"{best.strategy} (a peer) is the pick on {_host(d)}: {_cost(best)}"
    own = d.own.picked if d.own is not None else None
    mine = (
        f"of loadbench's own, use {own.strategy}: {_cost(own)}"
        if own is not None
        else "none of loadbench's own fits"
    )
    return _bounded(first, [*_sure(d), mine, *busy, *conditions])


def to_use(d: Decision) -> str | None:
    """The strategy to use in one's own code: the pick, or loadbench's best beside a peer."""
    best = d.picked
    if best is not None and best.peer:
        return d.own.pick if d.own is not None else None
    return d.pick


def decision_json(d: Decision) -> dict[str, Any]:
    """`d.to_json()` with its sentence (`sentence`) and `details`, as the JSON surfaces print
    it."""
    return {**d.to_json(), "sentence": sentence(d), "details": details(d)}
