"""`load_model`: a `.safetensors` checkpoint into an NNX model, never random weights in silence.

It enters its strategy as `loader.strategies.StrategyInfo.run` does, the one way in that
`StrategyInfo.load` and the bench's child take too (`StrategyInfo.checked`), so a URL given to a
strategy that reads local files only, a URL's option given for a local path and an option the
strategy does not take are each refused there, once.
"""

from __future__ import annotations

import os
from typing import Any, Unpack

from loader import strategies
from loader.options import LoadOptions, OptionKeywords
from loader.planning.keys import KeyMap
from loader.planning.policy import LoadPolicy, Patterns
from loader.report import LoadReport
from loader.sequence import LoadArgs, LoadRequest, OnBuilt
from loader.strategies import StrategyError
from loader.vocabulary import DEFAULT_STRATEGY, REPORT


def load_model(  # noqa: PLR0913  the public keywords are contracts, each keyword-only
    target: Any,
    path: str | os.PathLike[str],
    *,
    strict: bool = False,
    key_map: KeyMap | None = None,
    ignore_unexpected: Patterns = (),
    ignore_missing: Patterns = (),
    casts: str = REPORT,
    strategy: str | None = None,
    on_built: OnBuilt | None = None,
    options: LoadOptions | None = None,
    **keywords: Unpack[OptionKeywords],
) -> tuple[Any, LoadReport]:
    """Load a checkpoint into an NNX model.

    `strict`, `key_map`, `ignore_unexpected`, `ignore_missing`, `casts` and `on_built` apply to
    every strategy (`loader.sequence.LoadArgs`). A strategy's own options come as `options`, a
    `loader.options.LoadOptions` of the groups by role (reading, placement, remote, sharing,
    checking; a strategy's `OPTIONS` names the groups it takes), each value checked when the
    groups are made. The options' own keywords (`budget` to `share` below, typed by
    `loader.options.OptionKeywords`) are a shim that builds the same `LoadOptions` (give one or
    the other, not both); None means not given. An option the chosen strategy does not take is
    refused (`StrategyError`, naming it), never dropped in silence.

    Args:
        target: an `nnx.Module` instance (filled in place), or a zero-argument builder, built
            abstractly (`nnx.eval_shape` semantics) so that no random model ever exists.
        path: a `.safetensors` file, or a folder of shards (with or without an index); or a URL:
            `https://host/path/model.safetensors`, `s3://bucket/key`,
            `hf://org/repo[@revision][/file-or-folder]`, `gs://bucket/key` (a file, a folder or
            a `*.safetensors.index.json`; the stores of `loader.remote.registry`), read by range
            requests.
        strict: raise `loader.CheckpointError` listing every mismatch instead of warning.
        key_map: model key -> file key (or (file key, transform)), or a callable doing the same.
            An entry whose model key is no model path is reported (an error under strict).
        ignore_unexpected: glob patterns (`"pooler.*"`, `"*.position_ids"`) over file keys that
            the model does not need: listed in `report.ignored`, not reported. A pattern that
            matches nothing is reported (an error under strict).
        ignore_missing: glob patterns over model paths the file may lack (left at their init,
            zeros for a builder target), listed the same way.
        casts: `"report"` (default: a dtype change is a mismatch) or `"allow"`: a float-to-float
            cast to the model's declared dtype is expected (listed in `report.casts`, no
            warning). An integer cast (I64 file into int32 with jax's 32-bit default) is checked
            value by value and never a mismatch; integer <-> float or bool stays one.
        strategy: a registered name (`loader.strategies.names()`); default `pipelined`, which
            reads on several threads while the model is built and casts in chunks.
        options: the strategy's options, grouped (`loader.options.LoadOptions`); None: those the
            keywords below give, if any.
        budget: host bytes in flight beyond the model's own (`pipelined`; `sharded`: the bytes
            read ahead of the tensor being placed; default 256 MiB).
        staging: whether `pipelined` streams leaves onto the devices through its ring of host
            staging buffers, chunk by chunk. None (default) decides by backend: staged where
            the devices do not adopt host buffers (GPU, TPU), direct on the CPU backend. True
            forces the ring (also on the CPU backend, where it is tested); False reads into
            host buffers that the devices take whole (one per leaf, no ring).
        threads: `pipelined`'s reader threads (default: by the usable CPUs and the page cache).
        cache_policy: `pipelined`'s page cache: `"auto"` (default), `"keep"` or `"dontneed"`.
        on_built: called with the model as soon as it is built (abstract for a builder), before
            any leaf is assigned; with `pipelined` the reads are already running, so a forward
            compiled from it (on a thread) is ready about when the weights are. It must return
            quickly and leave the model as it is.
        concurrency: a URL's range requests in flight (default
            `loader.remote.DEFAULT_CONCURRENCY`; recorded in `LoadReport.remote`).
        cache_dir: download a URL's files here once, then load them locally; without it a
            remote load writes no file.
        max_over_read: `sharded` over a URL: the most its read plan reads, as a ratio of the
            bytes of the process's share (default 1.5; 1: only the share). Gaps between a
            column block's rows are read through, smallest first, within it, to send few large
            requests instead of one per row (`loader.sharded.read_plan`; the plan is in
            `LoadReport.remote`).
        share: `sharded`, a file or a URL: how its processes split the checkpoint.
            `"regions"`: each reads its devices' own index ranges; `"bytes"`: each reads a
            contiguous leading-axis block of every tensor and JAX reshards them over the
            interconnect (XLA's collectives); `"auto"` (default): regions for one process or a
            local file, bytes over a URL where regions would send more requests than a
            process's share / 8 MiB + its tensors + 10, or receive more than 1.05x the bytes
            that bytes mode reads (`loader.sharded.share.AUTO_OVER_BYTES`). `LoadReport.share`
            says what was chosen and why, and the bytes each process received from the others
            (`exchanged_bytes`).
        digest: a URL's file as `"sha256:<hex>"` (several files: a mapping of each file's
            name to its digest), checked over the bytes received before the model is
            returned; the Hub's LFS files carry theirs (`loader.remote.digest`).
        unvalidated: `"allow"` loads from a server that sends neither ETag nor Last-Modified
            with no digest known (refused otherwise: a file replaced mid-load would go unseen).
        idle_timeout: seconds without a byte before a range request fails (default 30).
        timeout: seconds a remote load may take in all (default: no bound).

    Returns:
        (model, LoadReport). Each problem in the report was also warned about (or raised).

    Raises:
        MismatchError: `strict=True` and the file and the model disagree.
        StrategyError: an unknown strategy, one that loads no model, or an option it does not take
            (`load_model(..., strategy="hostcast", budget=1 << 20)`).
        TypeError: `options` and one of the keywords that build it, both given.

    Example:
        >>> model, report = loader.load_model(lambda: MLP(rngs=nnx.Rngs(0)), "mlp.safetensors")
        >>> model, report = loader.load_model(builder, "vit/model.safetensors", strict=True,
        ...     key_map=vit.key_map(config), ignore_unexpected=("vit.pooler.*",), casts="allow")
        >>> model, report = loader.load_model(builder, "model.safetensors",
        ...     options=LoadOptions(reading=Reading(budget=64 << 20, threads=4)))
    """
    given = {k: v for k, v in keywords.items() if v is not None}
    if options is not None and given:
        raise TypeError(
            f"load_model: give options= or the keywords {', '.join(given)}, not both "
            "(put them in the options' groups: loader.options)"
        )
    policy = LoadPolicy.of(
        ignore_unexpected=ignore_unexpected, ignore_missing=ignore_missing, casts=casts
    )
    info = strategies.get(strategy or DEFAULT_STRATEGY)
    args = LoadArgs(strict=strict, key_map=key_map, on_built=on_built, policy=policy)
    grouped = options if options is not None else LoadOptions.of(**given)
    request = LoadRequest(target, path, args=args, options=grouped)
    model, report = info.checked(request)(request)  # `StrategyInfo.run`, its walk one file less
    return model, _model_report(info, report)


def _model_report(info: strategies.StrategyInfo, report: LoadReport | None) -> LoadReport:
    """The report of a strategy that loads a model; a REFERENCE strategy (`floor`, which reads
    bytes and loads no model) is refused."""
    if report is None:
        raise StrategyError(
            f"strategy {info.name!r} loads no model (kind {info.kind}); "
            f"pick one of {', '.join(n for n in strategies.names() if n != info.name)}"
        )
    return report
