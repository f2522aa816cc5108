"""Finding a spec by name or path: shipped presets, fetched specs, spec files, local checkpoints.

Shipped presets live in `shapes/presets/<name>.json`. Fetched specs live in the user presets folder
`$LOADBENCH_HOME/shapes/<name>.json` (default `~/.cache/loadbench/shapes/`).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from shapes.errors import UnknownSpecError
from shapes.spec import ShapeSpec, read_spec_file

PRESETS_DIR = Path(__file__).resolve().parent / "presets"


def home() -> Path:
    """The loadbench home folder: `$LOADBENCH_HOME`, default `~/.cache/loadbench`."""
    return Path(os.environ.get("LOADBENCH_HOME") or Path.home() / ".cache" / "loadbench")


def user_presets_dir() -> Path:
    """Where `shapes fetch` saves specs by name."""
    return home() / "shapes"


def preset_names() -> list[str]:
    """Names of the specs shipped with loadbench."""
    return sorted(p.stem for p in PRESETS_DIR.glob("*.json"))


def fetched_names() -> list[str]:
    """Names of the specs saved by `shapes fetch` in the user presets folder."""
    folder = user_presets_dir()
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def default_name(repo_id: str) -> str:
    """The name a fetched repo is saved under unless `--name` says otherwise: `org--repo`."""
    return repo_id.strip("/").replace("/", "--")


def _named_path(name: str) -> Path | None:
    if "/" not in name and "\\" not in name and not name.endswith(".json"):
        for candidate in (PRESETS_DIR / f"{name}.json", user_presets_dir() / f"{name}.json"):
            if candidate.is_file():
                return candidate
    elif (
        name.count("/") == 1 and not Path(name).exists()
    ):  # a repo id fetched under its default name
        candidate = user_presets_dir() / f"{default_name(name)}.json"
        if candidate.is_file():
            return candidate
    return None


def load_spec(name_or_path: str | os.PathLike | ShapeSpec) -> ShapeSpec:
    """Load a spec by preset name, fetched name, spec JSON path, or local checkpoint path.

    Args:
        name_or_path: a preset (`"sa3"`), a name saved by `shapes fetch` (or the repo id it was
            fetched from), a spec `.json` file, a `.safetensors` file, or a folder of shards
            (read through their headers only). A `ShapeSpec` is returned as is.

    Returns:
        The `ShapeSpec`.

    Raises:
        UnknownSpecError: nothing by that name or path; the message lists the known names.
    """
    if isinstance(name_or_path, ShapeSpec):
        return name_or_path
    text = os.fspath(name_or_path)
    named = _named_path(text) if not isinstance(name_or_path, Path) else None
    if named is not None:
        return read_spec_file(named, name=text)
    path = Path(text).expanduser()
    if path.is_dir() or path.suffix == ".safetensors" or path.name.endswith(".index.json"):
        from shapes.local import spec_from_local

        return spec_from_local(path)
    if path.is_file():
        return read_spec_file(path)
    known = preset_names() + fetched_names()
    close = difflib.get_close_matches(text, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise UnknownSpecError(
        f"no shape spec named {text!r}{hint} and no such file or folder. Presets: "
        f"{', '.join(preset_names())}; fetched ({user_presets_dir()}): "
        f"{', '.join(fetched_names()) or 'none'}. Fetch one with `loadbench shapes fetch REPO`."
    )
