"""The machine probe (`loadbench probe`): this machine's ceiling for loading a checkpoint.

`bandwidth` (the copy passes), `limits` (the limits in force, from the kernel), `accelerator`
(what jax sees), `child` (the measuring process), `run` (the child inside the asked limits) and
`record` (the versioned probe record); `allocator` (what glibc's heap keeps after a load, for the
peak fits). `facts` (the machine facts every run record and probe record carries: CPU, RAM,
kernel, versions) lives here too, below `bench.run`, which stamps them on each run; this package
imports nothing of `bench.run`.
"""
