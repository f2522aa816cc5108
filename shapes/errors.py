"""The shapes package's error types: one base class, subclassing the loader's `CheckpointError`."""

from __future__ import annotations

from loader.errors import CheckpointError


class ShapesError(CheckpointError):
    """A shape spec cannot be found, read, fetched, synthesised or verified as asked.

    The message names the spec, file or tensor, what was expected and how to fix it.
    """


class UnknownSpecError(ShapesError):
    """A name is neither a preset, a fetched spec, nor an existing path."""


class FetchError(ShapesError):
    """The Hugging Face Hub gave no tensor shapes (missing, gated, offline, malformed)."""


class VerificationError(ShapesError):
    """A loaded tensor does not hold the values a synthetic checkpoint recorded for it."""
