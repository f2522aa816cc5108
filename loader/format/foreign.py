"""Name the format of a clearly non-safetensors file from its first bytes (never unpickled).

Used only to explain a refusal: a valid safetensors header length can begin with a foreign magic (a
640-byte header starts `80 02`, a pickle's opening), so the header reader never refuses a file for
what this finds, it only says it when the header is refused anyway.
"""

from __future__ import annotations

_PICKLE_PROTOCOLS = {2, 3, 4, 5}
SNIFF_BYTES = 64  # enough to recognise the formats below


def sniff_foreign(first_bytes: bytes) -> str | None:
    """Name the format of a file that is clearly not safetensors (never unpickled), else None."""
    if first_bytes.startswith(b"PK\x03\x04"):
        return "a zip archive (a `torch.save` checkpoint is one)"
    if len(first_bytes) >= 2 and first_bytes[0] == 0x80 and first_bytes[1] in _PICKLE_PROTOCOLS:
        return "a Python pickle (a legacy `torch.save` / `pickle.dump` file)"
    if first_bytes.startswith(b"version https://git-lfs"):
        return "a Git LFS pointer, not the weights it points to (run `git lfs pull`)"
    if first_bytes.startswith(b"\x93NUMPY"):
        return "a numpy .npy file"
    if first_bytes.startswith(b"\x89HDF"):
        return "an HDF5 file"
    return None
