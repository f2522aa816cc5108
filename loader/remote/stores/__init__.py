"""The stores, one module a scheme, each registered once in `loader.remote.registry`.

- `http`: `https://` and `http://` (no listing: a folder is its index, else its
  `model.safetensors`);
- `s3`: `s3://bucket/key`, through `obstore` (signing, listing) and `http.client` bodies;
- `hub`: `hf://org/repo[@revision]`, through `huggingface_hub` (revision, token, gated repos);
- `gcs`: `gs://bucket/object`, through `obstore` (credentials, generations, listing).

Each module gives a `KIND` (`loader.remote.store.StoreKind`): nothing but the registry imports
them (`tests/unit/test_remote_registry.py`).
"""
