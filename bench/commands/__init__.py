"""The `loadbench` subcommands, one module each (see `COMMANDS` in `bench.cli`)."""
