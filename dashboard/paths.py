"""Safe access to files a result row names (memray captures): only ever inside the results folder.

A path recorded in a results file is untrusted text. It is resolved (symlinks included) and opened
only if it lands inside the results folder; nothing from the URL or query parameters is ever opened.
"""

from __future__ import annotations

from pathlib import Path

MAX_BYTES = 64 << 20  # a flamegraph larger than this is offered for download, not embedded


def _candidates(base: Path, recorded: str, machine: str | None) -> list[Path]:
    path = Path(recorded)
    if not path.is_absolute():
        return [base / path] + ([base / machine / path] if machine else [])
    out = [path]
    if machine and machine in path.parts:  # results written elsewhere, then moved here
        tail = path.parts[len(path.parts) - 1 - path.parts[::-1].index(machine) :]
        out.append(base.joinpath(*tail))
    return out


def inside(root: Path, recorded: str | None, *, machine: str | None = None) -> Path | None:
    """Resolve a path a result row names, if it is an existing file inside the results folder.

    Args:
        root: the results folder.
        recorded: a path from a result row (`memray_html`, `memray_top`): relative to `root` or
            to `root/<machine>`, or absolute (then it must lie inside `root`, or its
            `<machine>/...` tail must exist inside `root`).
        machine: the run's machine id.

    Returns:
        The resolved path, or None (absent, not a file, or outside `root` after resolving links).
    """
    if not recorded or not isinstance(recorded, str):
        return None
    base = root.resolve()
    for candidate in _candidates(base, recorded, machine):
        resolved = candidate.resolve()
        if resolved.is_relative_to(base) and resolved.is_file():
            return resolved
    return None


def read_text(root: Path, recorded: str | None, *, machine: str | None = None) -> str | None:
    """The text of a file named by a result row, if it is safely inside `root` and not huge."""
    path = inside(root, recorded, machine=machine)
    if path is None or path.stat().st_size > MAX_BYTES:
        return None
    return path.read_text(encoding="utf-8", errors="replace")
