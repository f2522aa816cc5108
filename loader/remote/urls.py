"""The remote checkpoint URL forms `load_model` takes, parsed once (these forms are contracts).

Each form is a store's (`loader.remote.stores`), registered in `loader.remote.registry`:

- `https://host/path/model.safetensors` (or `http://`): one file, a `*.safetensors.index.json`,
  or a folder (a URL not ending in either): its `model.safetensors.index.json`, else its
  `model.safetensors` (HTTP has no listing).
- `s3://bucket/key`: one object, an index, or a prefix (listed: its index, else every
  `*.safetensors` right under it). The endpoint and credentials come from the usual AWS variables
  (`AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, ...).
- `hf://org/repo[@revision][/file-or-folder]`: a Hugging Face Hub repo at a branch, tag or commit
  (default `main`), through `huggingface_hub` (endpoint `HF_ENDPOINT`, token `HF_TOKEN` or the
  stored login).
- `gs://bucket/object`: Google Cloud Storage, as `s3://` (listed); credentials from the usual
  chain (anonymous where there are none), `STORAGE_EMULATOR_HOST` for an emulator.

This module names the forms; `parse_url` and `is_url` are the registry's.
"""

from __future__ import annotations

from loader.remote.registry import is_url, parse_url
from loader.remote.store import INDEX_SUFFIX, RemoteURL, shown

__all__ = ["INDEX_SUFFIX", "RemoteURL", "is_url", "parse_url", "shown"]
