"""The bench summary as text (`tables`): a table per configuration that leads with the answer,
its legend, notes and the judge's sentence last, from the rows and decisions `frame` gives.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from bench.analysis.backend import backend_sentence, backends
from bench.analysis.decision_words import sentence
from bench.analysis.device_summary import (
    device_headroom,
    device_peak,
    first_compile_lines,
    over_budget_lines,
)
from bench.analysis.judge import Decision, loaded
from bench.analysis.shares import process_shares, share_lines
from bench.analysis.summary.frame import (
    as_float,
    as_int,
    as_str,
    blocks,
    configuration_keys,
    dtype_label,
    flag,
    same_configuration,
)
from bench.intervals import ADVICE
from bench.link import FILE_SOURCE, UNSHAPED
from bench.records.results import Results
from bench.vocabulary import COLD, COMPILE_CACHE_WORDS, OK
from loader.vocabulary import DEFAULT_STRATEGY, REFERENCE
from shapes.sizes import MISSING, format_gib, format_rate, significant


def _ready_line(
    name: str, ready: float | None, load: float | None, comp: float | None
) -> str | None:
    if ready is None or load is None or comp is None:
        return None
    return (
        f"  {name}: ready in {ready:.2f} s (load {load:.2f} s, compile {comp:.2f} s: "
        f"{ready / max(load, comp):.2f}x their max, sum {load + comp:.2f} s)"
    )


def ready_lines(group: pd.DataFrame) -> list[str]:
    """`--compile`: per strategy, when the model was loaded and its forward compiled (the time to
    ready against the load's and the compile's own)."""
    lines = (
        _ready_line(
            str(r["strategy"]),
            *(as_float(r.get(k)) for k in ("ready_s", "load_s", "compile_wall_s")),
        )
        for _, r in group.iterrows()
    )
    return [line for line in lines if line]


def _fixed(value: float) -> str:
    """`1.23` (seconds, a ratio); below 0.01, three significant digits (`0.000347`), never in
    exponent form."""
    if value >= 0.01 or value <= 0:
        return f"{value:.2f}"
    return f"{value:.{2 - math.floor(math.log10(value))}f}"


def _in_gib(n: float) -> str:
    """`1.23` (GiB, no unit): three significant digits, as `format_gib` says a size."""
    return significant(n / (1 << 30))


def _inflight(row: pd.Series) -> str:
    """`0.24 GiB / 0.25 GiB`: the high-water mark of bytes in flight over the budget."""
    peak = as_float(row.get("inflight_peak_bytes"))
    if peak is None:
        return MISSING
    budget = as_float(row.get("budget_bytes"))
    return f"{format_gib(peak)} / {format_gib(budget) if budget else 'its default'}"


def _anon_file(row: pd.Series) -> str:
    """`1.20 / 2.11 GiB`: the highest anonymous and file-backed RSS of the load; `n/a` for a
    measured load on a host that cannot tell them apart (no RssAnon / RssFile in its status);
    `-` for a row that measured nothing."""
    anon, file = as_float(row.get("peak_anon_rss_bytes")), as_float(row.get("peak_file_rss_bytes"))
    if anon is None or file is None:
        return "n/a" if as_float(row.get("peak_rss_bytes")) is not None else MISSING
    return f"{_in_gib(anon)} / {format_gib(file)}"


def _device_ceiling(row: pd.Series) -> str:
    """`1.42x`: the median wall over the device ceiling (a load onto an accelerator); `-` else."""
    ratio = as_float(row.get("device_ceiling_ratio"))
    return f"{ratio:.2f}x" if ratio is not None else MISSING


def _cpu(row: pd.Series) -> str:
    """`1.71` CPU-seconds of the load, `1.71 (1.02)` beside the C ceiling's for its bytes."""
    cpu, ceiling = as_float(row.get("cpu_s")), as_float(row.get("ceiling_cpu_s"))
    if cpu is None:
        return MISSING
    return _fixed(cpu) + (f" ({_fixed(ceiling)})" if ceiling is not None else "")


def _status(row: pd.Series) -> str:
    """`ok`, `ok (2/3 ok)`, or a skipped or failed row's status with its reason's first line."""
    status = str(row["status"])
    if row["ok_repeats"] != row["repeats"] and row["ok_repeats"]:
        return f"{status} ({row['ok_repeats']}/{row['repeats']} ok)"
    if status != OK and isinstance(row["error"], str) and row["error"].strip():
        return f"{status}: {row['error'].strip().splitlines()[0][:REASON_CHARS]}"
    return status


def _name(row: pd.Series, answer: Decision) -> str:
    """The strategy, `*` before the judge's pick, `(default)` after `loader`'s default."""
    name = str(row["strategy"])
    mark = "* " if name == answer.pick else "  "
    return mark + name + (" (default)" if name == DEFAULT_STRATEGY else "")


def paired_text(row: pd.Series) -> str:
    """`2.57x (2.11-3.14, n=6)`: the paired ratio's estimate, 95% interval and repeats; the
    median `ceiling_ratio` in rows that carry no reference (older files); `-` neither."""
    paired, n = as_float(row.get("paired_ratio")), as_int(row.get("paired_n")) or 0
    if paired is None:
        ceiling = as_float(row.get("ceiling_ratio"))
        return f"{ceiling:.2f}x" if ceiling is not None else MISSING
    if n < 2:
        return f"{paired:.2f}x (n=1)"
    low, high = as_float(row.get("paired_low")), as_float(row.get("paired_high"))
    return f"{paired:.2f}x ({low:.2f}-{high:.2f}, n={n})"


def _cells(row: pd.Series, answer: Decision) -> list[str]:
    ratio, wall = as_float(row["peak_ratio"]), as_float(row["wall_s"])
    spread = ""
    if wall is not None and row["ok_repeats"] > 1:
        spread = f" ({as_float(row['wall_s_min']):.2f}-{as_float(row['wall_s_max']):.2f})"
    tput, received = (
        as_float(row["throughput_bytes_per_s"]),
        as_float(row.get("received_bytes_per_s")),
    )
    floor = as_float(row.get("floor_ratio"))
    return [
        _name(row, answer),
        format_gib(as_float(row["peak_rss_bytes"])),
        f"{ratio:.2f}x" if ratio is not None else MISSING,
        _anon_file(row),
        device_peak(row, format_gib),
        device_headroom(row, format_gib),
        f"{wall:.2f}{spread}" if wall is not None else MISSING,
        _cpu(row),
        f"{_in_gib(tput)} GiB/s" if tput is not None else MISSING,
        f"{_in_gib(received)} GiB/s" if received is not None else MISSING,
        f"{floor:.2f}x" if floor is not None else MISSING,
        paired_text(row),
        _device_ceiling(row),
        _inflight(row),
        _status(row),
    ]


#: The table's columns and what each means (the legend under the header).
COLUMNS = (
    ("strategy", "* recommended for this host"),
    ("peak RSS", "the load's peak resident memory"),
    ("x ckpt", "(peak - baseline) / checkpoint"),
    (
        "anon / file",
        "the highest anonymous / file-backed RSS (sampled; need not sum to the peak; n/a: the "
        "host cannot tell them apart)",
    ),
    (
        "device peak",
        "device memory peak (GPU/TPU; +over: above the model by more than the budget)",
    ),
    ("device free", "device memory left at the peak (bytes_limit - peak)"),
    ("wall s (min-max)", "median load time over the repeats"),
    ("CPU s (C)", "user + system CPU-seconds of the load (the C copy's for its bytes)"),
    ("GiB/s", "checkpoint / wall"),
    ("received/s", "bytes received / wall (several processes: all their bytes / the slowest's)"),
    ("x floor", "x ceiling / the floor line's (a bare read, paired the same way)"),
    (
        "x ceiling",
        "wall / a bare copy of the checkpoint timed right before and after each repeat "
        "(geometric mean, 95% CI, repeats)",
    ),  # a shaped link's: `LINK_CEILING`
    (
        "x device ceiling",
        "wall / the larger of the checkpoint's read time and its host -> device transfer time "
        "at the probe's best rates (accelerator rows)",
    ),
    ("in flight / budget", "staging high-water mark / its bound"),
    ("status", ""),
)


HEADER = [name for name, _ in COLUMNS]


#: What "x ceiling" holds a remote row against: the bytes it needs over the shaped link's bandwidth.
LINK_CEILING = (
    "wall / the bytes needed over the link's bandwidth: the checkpoint's, or several processes' "
    "shares + headers through the one link"
)


REASON_CHARS = 70  # of a skipped or failed row's reason, in its status cell


def _ceiling(group: pd.DataFrame) -> str:
    """The block's ceiling: its rows' reference (a skipped or failed row has none; rows of older
    files, the machine probe's `ceiling_s`), `2.00 s`, or over a moving machine its range
    `0.21-0.43 s`; where its rows were held to different bytes (several processes' shares beside
    a whole checkpoint), each row's: `18.16 s pipelined, 18.20 s sharded (2 processes)`."""
    has_reference = "reference_s" in group and pd.to_numeric(group["reference_s"]).notna().any()
    column = "reference_s" if has_reference else ("ceiling_s" if "ceiling_s" in group else None)
    if column is None:
        return ""
    known = group.assign(seconds=pd.to_numeric(group[column])).dropna(subset=["seconds"])
    if known.empty:
        return ""
    seconds = known["seconds"]
    if seconds.max() <= seconds.min() * 1.005:
        return f"{_fixed(seconds.median())} s"
    if as_str(group.iloc[0].get("link")) in (None, UNSHAPED) or column == "ceiling_s":
        if column == "reference_s":
            return f"{_fixed(seconds.min())}-{_fixed(seconds.max())} s"
    return ", ".join(f"{_fixed(r['seconds'])} s {r['strategy']}" for _, r in known.iterrows())


def shaped_link(row: pd.Series) -> str | None:
    """The shaped link a remote row was loaded over (`1Gbit`); None for a local or unshaped one."""
    link = as_str(row.get("link"))
    return link if link and link != UNSHAPED else None


def remote_label(row: pd.Series) -> str:
    """`, over http, link 1Gbit, concurrency 16` for a remote row; empty for a local one."""
    source = as_str(row.get("source"))
    if not source or source == FILE_SOURCE:
        return ""
    concurrency = as_int(row.get("concurrency"))
    return f", over {source}, link {as_str(row.get('link')) or UNSHAPED}" + (
        f", concurrency {concurrency}" if concurrency is not None else ""
    )


def _title(first: pd.Series, ceiling: float | None) -> str:
    cache_state = as_str(first.get("cache"))
    speed = as_float(first.get("disk_read_bytes_per_s"))
    model = as_str(first.get("model"))
    compiled = COMPILE_CACHE_WORDS.get(as_str(first.get("compile_cache")) or "")
    return (
        f"{first['shapes']}: checkpoint {format_gib(first['checkpoint_bytes'])}, "
        + (f"model {model}, " if model and model != "spec" else "")
        + f"{int(first['tensors'])} tensors, {dtype_label(first)}, devices {int(first['devices'])}"
        + (f", cache {cache_state}" if cache_state else "")
        + (f", {compiled}" if compiled else "")
        + remote_label(first)
        + (f", disk reads capped at {format_rate(speed)}" if speed else "")
        + (f", ceiling {ceiling:.2f} s" if ceiling else "")
        + (
            " (NOT enforced: see the rows' error)"
            if flag(first, "disk_read_limit_enforced") is False
            else ""
        )
    )


#: Cold repeats of one strategy slower than this many times their fastest say the disk is not alone.
COLD_SPREAD_NOTE = 1.5


def cold_spread_note(group: pd.DataFrame) -> str | None:
    """Where cold repeats of the same file differ by over `COLD_SPREAD_NOTE`x, say so with the
    figures: the page cache was evicted before each (the resident fraction says whether it was), so
    the storage under this OS served the same bytes at different speeds (a hypervisor's or a
    network disk's cache, other tenants), and a cold figure from here carries that spread."""
    if as_str(group.iloc[0].get("cache")) != COLD:
        return None
    ok = group[(group["ok_repeats"] > 1) & (pd.to_numeric(group["wall_s_min"]) > 0)]
    spread = pd.to_numeric(ok["wall_s_max"]) / pd.to_numeric(ok["wall_s_min"])
    wide = ok[spread > COLD_SPREAD_NOTE]
    if wide.empty:
        return None
    worst = wide.iloc[int(spread[wide.index].to_numpy().argmax())]
    resident = as_float(worst.get("resident_fraction"))
    evicted = f", {resident:.0%} resident before each" if resident is not None else ""
    return (
        f"note: cold repeats differed up to {spread.max():.1f}x ({worst['strategy']} "
        f"{as_float(worst['wall_s_min']):.2f}-{as_float(worst['wall_s_max']):.2f} s{evicted}): the "
        "storage under this OS served the same bytes at different speeds (a hypervisor's or "
        "disk's cache, other tenants); cold figures and predictions from them carry that spread."
    )


#: What "x ceiling" and "x floor" hold a row against in files from before the reference pass.
UNPAIRED = {
    "x ceiling": "wall / this machine's best read",
    "x floor": "wall / the floor line's (a bare read)",
}


def _legend(keep: list[int], ceiling: str, link: str | None, paired: bool) -> str:
    """The columns kept and what each means; "x ceiling" and "x floor" say what they were held
    against (the reference beside each repeat, a shaped link, or an older file's probe)."""
    said = []
    for i in keep:
        name, meaning = COLUMNS[i]
        if not meaning or name == "strategy":
            continue
        if not paired:
            meaning = UNPAIRED.get(name, meaning)
        if name == "x ceiling" and link:
            meaning = LINK_CEILING
        if name == "x ceiling" and (link or ceiling):
            meaning += f" ({': '.join(t for t in (link, ceiling) if t)})"
        said.append(f"{name}: {meaning}")
    return "legend: " + "; ".join(said)


def order(group: pd.DataFrame, answer: Decision) -> list[Any]:
    """The block's rows in the order to print them: the pick, the others that fit by the measure
    ranked, those that do not fit by time, the reference line, then skipped and failed rows."""
    measured = loaded(group)
    by_name = {str(s): i for i, s in zip(measured.index, measured["strategy"], strict=True)}
    fits = [by_name[c.strategy] for c in answer.candidates if c.strategy in by_name]
    fits = sorted(fits, key=lambda i: by_name.get(str(answer.pick)) != i)
    rest = measured.drop(fits).sort_values("wall_s", kind="stable")
    reference = group[group["kind"] == REFERENCE]
    failed = group.drop([*measured.index, *reference.index]).sort_values("status", kind="stable")
    return [*fits, *rest.index, *reference.index, *failed.index]


def _block(group: pd.DataFrame, answer: Decision, shares: dict[Any, list[str]]) -> str:
    """One configuration: title, backend, header, legend, rows in the answer's order, the
    reasons and notes (`shares`: a multi-process remote row's bytes per process, by row), and
    the decision's sentence (`use X ...`) last."""
    rows_order = order(group, answer)
    ordered = group.loc[rows_order]
    cells = [_cells(r, answer) for _, r in ordered.iterrows()]
    always = ("strategy", "status")
    keep = [i for i, h in enumerate(HEADER) if h in always or any(c[i] != MISSING for c in cells)]
    rows = [[HEADER[i] for i in keep]] + [[c[i] for i in keep] for c in cells]
    widths = [max(len(r[i]) for r in rows) for i in range(len(keep))]
    ceiling = _ceiling(group)
    said = backends(group.assign(phase_device_peak_bytes=group.get("device_peak_bytes")))
    lines = [_title(group.iloc[0], None), backend_sentence(said)] + [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    lines.insert(3, "  ".join("-" * w for w in widths))
    paired = bool(
        pd.to_numeric(group.get("paired_n", pd.Series(dtype=float))).fillna(0).gt(0).any()
    )
    lines.append(_legend(keep, ceiling, shaped_link(group.iloc[0]), paired))
    said_shares = [line for i in rows_order for line in shares.get(i, [])]
    if said_shares:
        lines.append("bytes per process, against its share (its own ranges) + headers:")
    note = cold_spread_note(group)
    lines += said_shares + ready_lines(ordered) + ([note] if note else [])
    lines += over_budget_lines(ordered, format_gib) + first_compile_lines(ordered, format_gib)
    lines += unstable_lines(ordered)
    return "\n".join([*lines, sentence(answer)])


def unstable_lines(rows: pd.DataFrame) -> list[str]:
    """One line per row whose time is unstable, with the reasons and the advice
    (`bench.intervals.instability`)."""
    said = rows.get("unstable", pd.Series(index=rows.index, dtype=object))
    lines = [f"{r['strategy']}: {why}" for (_, r), why in zip(rows.iterrows(), said) if as_str(why)]
    return [*lines, ADVICE] if lines else []


def tables(results: Results) -> str:
    """A text table per configuration (`blocks`) that leads with the answer (the judge's
    decision, `bench.analysis.judge`): the backend, then the pick first (marked `*`; the default
    marked too), the others that fit by the measure ranked, those that do not, the reference
    line, skipped and failed rows with their reason; one legend line of the columns (sizes in GiB,
    throughput in GiB/s; a column empty on every row left out); and last the decision's sentence
    (`use X on ...`)."""
    processes = process_shares(results.phases, configuration_keys(results.phases))
    said = []
    for group, named, answer in blocks(results):
        shares = {i: share_lines(r, same_configuration(processes, r)) for i, r in group.iterrows()}
        said.append(_block(named, answer, shares))
    return "\n\n".join(said) + "\n" if said else "no results\n"
