"""memray capture of one worker run: the tracker, a flamegraph HTML and the top sites at the peak.

The bench captures in an extra run per (shapes, strategy), never in a measured one, because the
tracker adds time and memory; headline numbers always come from uncaptured runs. Files land at
`results/<machine>/<run-id>/memray/<strategy>-<shapes>-r<repeat>.{bin,html,top.txt}`.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

TOP_SITES = 15


@contextlib.contextmanager
def tracking(bin_path: str | Path | None) -> Iterator[None]:
    """Run the block under `memray.Tracker` with native traces; a no-op when `bin_path` is None."""
    if bin_path is None:
        yield
        return
    import memray

    Path(bin_path).parent.mkdir(parents=True, exist_ok=True)
    Path(bin_path).unlink(missing_ok=True)
    with memray.Tracker(str(bin_path), native_traces=True, follow_fork=False):
        yield


def _frame(function: str, filename: str, line: int, width: int = 160) -> str:
    text = f"{function} ({filename}:{line})"
    return text if len(text) <= width else text[: width - 3] + "..."


def top_sites(bin_path: str | Path, n: int = TOP_SITES) -> str:
    """A text table of the `n` largest allocation sites alive at the high-water mark."""
    from memray import FileReader

    reader = FileReader(str(bin_path))
    records = sorted(
        reader.get_high_watermark_allocation_records(merge_threads=True),
        key=lambda r: r.size,
        reverse=True,
    )
    peak = reader.metadata.peak_memory
    lines = [f"peak tracked memory: {peak / 2**20:.1f} MiB; top {n} sites alive at the peak", ""]
    for rec in records[:n]:
        try:
            stack = rec.hybrid_stack_trace(max_stacks=40)
        except NotImplementedError:
            stack = rec.stack_trace(max_stacks=12)
        share = rec.size / peak if peak else 0.0
        stack = [f for f in stack if "site-packages/memray" not in f[1]]
        python = [f for f in stack[2:] if f[1].endswith(".py")][:4]  # who asked, in Python terms
        frames = [_frame(*f) for f in stack[:2] + python] or ["<unknown>"]
        head = f"{rec.size / 2**20:10.1f} MiB {share:6.1%} {rec.n_allocations:6d} allocs  "
        lines.append(head + frames[0])
        lines += [" " * len(head) + f for f in frames[1:6]]
    return "\n".join(lines) + "\n"


def report(bin_path: str | Path) -> tuple[Path | None, Path | None, str | None]:
    """Write `<bin>.html` (flamegraph) and `<bin>.top.txt`; returns their paths and any error."""
    from loader.format.atomic import atomic_write_text

    bin_path = Path(bin_path)
    html, top = bin_path.with_suffix(".html"), bin_path.with_suffix(".top.txt")
    proc = subprocess.run(
        [sys.executable, "-m", "memray", "flamegraph", "--force", "-o", str(html), str(bin_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    error = None if proc.returncode == 0 else f"memray flamegraph failed: {proc.stderr[-500:]}"
    atomic_write_text(top, top_sites(bin_path))
    return (html if html.is_file() else None), top, error
