"""The loader's error types: one base class, so callers catch one thing."""

from __future__ import annotations


class CheckpointError(Exception):
    """A checkpoint cannot be read, written or applied as asked.

    The message names the file, the tensor or parameter, what was expected and how to fix it.
    """


class HeaderError(CheckpointError):
    """A `.safetensors` header is malformed, inconsistent with its file, or not safetensors."""


class MismatchError(CheckpointError):
    """`strict=True` load found missing, unexpected, reshaped, re-typed or re-sharded parameters."""

    def __init__(self, message: str, report: object) -> None:
        super().__init__(message)
        self.report = report


class IncompleteCheckpointError(CheckpointError):
    """A sharded checkpoint directory has no manifest: its writer did not finish."""


class DeviceOutOfMemoryError(CheckpointError):
    """A device ran out of memory while a tensor was transferred to it (the message names the
    tensor, the device and the device's free memory)."""


class RemoteError(CheckpointError):
    """A remote checkpoint (`https://`, `s3://`, `hf://`, `gs://`) cannot be found, reached or read.

    The message is one line: what failed, the URL (never a credential), the tensor and byte
    range where one was being read, and what to do. `details` holds the client's or server's
    own text (which may be long), for a log rather than the message.
    """

    def __init__(self, message: str, *, details: str = "") -> None:
        super().__init__(message)
        self.details = details


class RemoteChangedError(RemoteError):
    """A remote file changed during the load (its ETag or commit differs between requests)."""
