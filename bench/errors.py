"""The bench's one base error, so the CLI catches one thing and prints one line."""

from __future__ import annotations


class BenchError(Exception):
    """A bench run, a results file or a recommendation cannot proceed as asked.

    The message names the file, strategy or option, what was expected and how to fix it.
    """


class SchemaVersionError(BenchError):
    """A results file was written with a schema version this reader does not know."""


class NoResultsError(BenchError):
    """There are no measured runs to recommend from."""


class ChildResultError(BenchError):
    """A child's task or result JSON has another version, a missing field or a wrong type."""
