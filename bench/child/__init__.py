"""The child side of the bench: what runs inside a fresh worker process (may import jax).

`worker` (one measured load: `python -m bench.child.worker`), `phase_probe` (the phase probe:
per-phase RSS and time), `verify` (every loaded tensor against the synthetic checkpoint), `capture`
(memray), `prepare` (checkpoint synthesis and conversion before any measurement: `python -m
bench.child.prepare`) and `abstract_build` (the abstract-build micro-benchmark). The parent side
(`bench.run.runner` and the rest of `bench/`) never imports this package; the two sides meet in
`bench.records.wire`.
"""
