"""Remote sources for the bench: real servers started here, optionally behind a shaped link.

- `servers`: Debian's nginx (HTTP with Range), SeaweedFS (the bench's S3) and moto's standalone
  S3 server (the tests'), started on an address this run owns (127.0.0.1, or inside its own
  network namespace), stopped afterwards.
- `serve`: the checkpoint served for a run (`--source`: `SOURCES`, one entry a source, with
  fake-gcs-server for `gcs`; `--link`): the server, its URL, the environment the children read
  it with;
- `shaping`: a network namespace joined by a veth pair whose host end is shaped with `tc tbf`
  (the bandwidth); removed afterwards, on Ctrl-C and on failure too.
"""

FILE_SOURCE = "file"  # the checkpoint on the local disk (every run before `--source`)
UNSHAPED = "unshaped"  # a remote run over loopback, no link shaped (the rows say so)
