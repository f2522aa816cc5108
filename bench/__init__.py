"""The bench: per-phase RSS and time of each load strategy, each run in a fresh process.

Pipeline: `probe` (measures one process) -> `worker` (one child run, writes JSON) -> `runner`
(the matrix of children, never imports jax) -> `results` (the one schema, writer and reader) ->
`recommend` (predicts peak and time on a target host). `cli` is the `loadbench` command.
"""
