"""The bench: per-phase RSS and time of each load strategy, each run in a fresh process.

Parent side (never imports jax): `cli` (the `loadbench` command) -> `runner` (one run: the
`matrix` of tasks under a `config`, children started by `launch` and watched by `children`) ->
`rows` (each child's result as schema records) -> `writer` and `results` (the one writer and
the one reader of `schema`) -> `summary` (the end-of-run tables) and `recommend` (predictions for a
target host). `strategies` is the loader's registry plus `LOADBENCH_EXTRA_STRATEGIES`; `machine`,
`units` and `errors` serve them all.

Child side, `bench.child` (may import jax): `worker` measures one load with the `probe` and checks
it with `verify`; `prepare` synthesises and converts checkpoints; `capture` runs memray.

The two sides meet in `child_result`: the typed, versioned task and result that cross the process
boundary.
"""
