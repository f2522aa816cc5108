"""Every file in scripts/ is run by a make target or a test, so none rots unseen (issue 72): a
probe written for one day's question belongs in git's history, not in the tree."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def unused(scripts: list[Path], texts: list[str]) -> list[str]:
    """The scripts no text names as `scripts/<name>`."""
    return [p.name for p in scripts if not any(f"scripts/{p.name}" in t for t in texts)]


def test_every_script_is_run_by_a_make_target_or_a_test():
    scripts = sorted(p for p in (ROOT / "scripts").iterdir() if p.is_file())
    texts = [(ROOT / "Makefile").read_text(encoding="utf-8")]
    texts += [p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("*.py")]
    programs = [p for p in scripts if p.suffix in (".py", ".sh")]
    data = [p for p in scripts if p not in programs]  # a list a script reads (the wheels)
    found = unused(programs, texts)
    found += unused(data, [p.read_text(encoding="utf-8") for p in programs])
    assert not found, f"scripts no make target or test runs: {found}"


def test_a_script_nothing_names_is_found():
    assert unused([Path("scripts/probe.py"), Path("scripts/sizes.py")], ["scripts/sizes.py"]) == [
        "probe.py"
    ]
