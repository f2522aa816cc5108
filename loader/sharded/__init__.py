"""Sharded checkpoints: each process reads (and writes) only the slices its devices hold.

- `rule`: the sharding rule (split the largest axis the device count divides); imports no jax.
- `layout`: where each slice of each tensor lives (`Layout`, the sharded directory's manifest).
- `slices`: the slice reader (any index range of a tensor, from the slices holding it) and writer.
- `load`: the sharded load of a `Layout`, this process's index ranges only (or, `share="bytes"`,
  its leading-axis blocks resharded).
- `share`: how processes split a plain checkpoint (`regions`, `bytes`, `auto`) and what it cost.
- `blocks`: bytes mode: a leading-axis block per process, resharded over the interconnect.
- `read_plan`, `remote`, `files`: a share read in few large requests; a remote or local file.
- `directory`: `save_sharded` / `load_sharded` / `convert_to_sharded`, a directory of shard files.

Importing this package imports no jax; its modules that need jax import it themselves.
"""
