"""The file side of a load: the safetensors format, and reading and writing checkpoint files.

- `header`: the one validating header reader (`read_header` / `parse_header`) and the header
  writer (`encode_header`); `foreign`: naming a file that is not safetensors (zip, pickle, LFS).
- `records`: the tensor records every layer shares (`TensorMeta`: key, dtype, shape; `TensorInfo`:
  plus byte offsets; `Header`); `dtypes`: the dtype table. Re-exported here
  (`from loader.format import read_header, TensorMeta, DTYPES`).
- `source`: `CheckpointSource`, a file or a folder of shards to read tensors from (`pread`).
- `header_json`: the header's JSON decoded as strictly as safetensors' own parser (serde_json).
- `atomic`: crash-safe writes (temp file, fsync, `os.replace`); `stale_temps`: its temporaries'
  naming pattern, liveness lock and the removal of those a killed writer left.
- `buffers`: page-aligned host buffers that the CPU backend adopts without a copy; `libc`: the C
  library's functions Python's own modules lack, opened once.
- `file_order`: tensors in the order their bytes lie, files taken in turn.

Nothing here imports jax.
"""

from loader.format.dtypes import DTYPES, dtype_name, numpy_dtype
from loader.format.header import (
    MAX_HEADER_BYTES,
    METADATA_KEY,
    encode_header,
    parse_header,
    read_header,
)
from loader.format.records import Header, TensorInfo, TensorMeta

__all__ = [
    "DTYPES",
    "MAX_HEADER_BYTES",
    "METADATA_KEY",
    "Header",
    "TensorInfo",
    "TensorMeta",
    "dtype_name",
    "encode_header",
    "numpy_dtype",
    "parse_header",
    "read_header",
]
