"""``nmt-convert ensemble BUNDLE BUNDLE [...] --out DIR``: several bundles served as one.

An ensemble decodes every hypothesis with each member and ranks its candidates by the
members' combined log-probs, as Marian (``--models a b --weights``), Nematus, OpenNMT-py
(``-model a b``) and fairseq (``--path a:b``) do; the WMT systems of those toolkits were
ensembles. Here the members are bundles that passed their own gates, and the ensemble is
one more bundle: composed graphs under the contract of :mod:`export.spec`, so the server,
its batching, greedy steps and lanes serve it as they serve any model::

    encoder.onnx  every member's encoder on the same source; ``memory`` and ``keys`` are
                  the members' concatenated along their last axis (member i at its
                  offset), ``src_mask`` the first member's, ``init_m<i>_<state>`` each
                  member's initial states
    decoder.onnx  each member's step on its slice of memory and keys and its own states;
                  the input of its TopK (log-probs, pad/bos/eos at -inf) combined over
                  the members, EOS likewise, then one TopK:
                      log-linear  sum_i w_i x_i           Marian, Nematus (weights as
                                                          given; default 1 each), OpenNMT-py
                                                          <= 3.0.2 (1/n each)
                      linear      log sum_i w_i exp(x_i)  fairseq (1/n each)
                  or, ``renormalize``, ``log_softmax`` of the combination over the whole
                  vocabulary: Eole and OpenNMT-py >= 3.0.3 (log-linear, 1/n each: the
                  normalised mean of the members' logits)
                  attention: the members' mean, weighted by w_i / sum w

Members must share the tokenizers (the same files), vocabularies, special ids, decoding
defaults and precision; what differs is refused by name (:class:`EnsembleError`). A
member's ``coverage`` state keeps its name, which the server treats specially, so at most
one member may have coverage attention. The gate (:mod:`export.ensemble_gate`) checks the
composed graphs against the members' own sessions combined in numpy.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from export import spec
from export.writer import ExportError, graph_io, install, out_problem, staging_dir

log = logging.getLogger(__name__)

COMBINE = ("log-linear", "linear")
PRECISIONS = ("fp32", "int8")  # fp16 members: their TopK input is fp16 inside the graph
# weights the float32 graph computes with as given (1e-46 would be 0 there, 1e39 infinity)
MIN_WEIGHT, MAX_WEIGHT = 1e-6, 1e6


class EnsembleError(ExportError):
    """Bundles that cannot be served as one ensemble; the message says which and why."""


@dataclass(frozen=True)
class Member:
    """One member bundle: its directory, manifest and contract, its widths of memory
    ``D`` and keys ``K``, and the names its states take in the ensemble."""

    index: int
    path: Path
    manifest: dict[str, Any]
    config: spec.BundleConfig
    memory_dim: int
    keys_dim: int
    states: tuple[str, ...]  # the ensemble's names of this member's states, in order

    @property
    def prefix(self) -> str:
        """What this member's node and value names start with inside the ensemble."""
        return f"m{self.index}/"


def state_name(index: int, name: str) -> str:
    """The ensemble's name of member ``index``'s state ``name`` (coverage keeps its own)."""
    return name if name == spec.COVERAGE else f"m{index}_{name}"


def _last_dim(manifest: dict, graph: str, output: str, where: str) -> int:
    """The last dimension of encoder output ``output`` as the manifest records it."""
    dim = None
    graphs = manifest.get("graphs")
    values = graphs.get(graph, {}).get("outputs") if isinstance(graphs, dict) else None
    if isinstance(values, list):
        found = [v for v in values if isinstance(v, dict) and v.get("name") == output]
        shape = found[0].get("shape") if found else None
        dim = shape[-1] if isinstance(shape, list) and shape else None
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
        raise EnsembleError(
            f"{where}: the manifest does not give the width of the encoder's {output!r} "
            f"(got {dim!r}); re-export the member with this version"
        )
    return dim


def read_members(paths: Sequence[Path]) -> list[Member]:
    """Read and verify each member bundle (manifest, sha256 of every file)."""
    from service.bundle import BundleError, read_manifest

    if len(paths) < 2:
        raise EnsembleError(f"an ensemble needs at least two bundles, got {len(paths)}")
    members = []
    for i, path in enumerate(paths):
        where = f"member {i + 1} ({path})"
        if not Path(path).is_dir():
            raise EnsembleError(f"{where}: not a bundle directory")
        try:
            manifest = read_manifest(Path(path))
            config = spec.BundleConfig.from_manifest(manifest)
        except (BundleError, spec.ContractError) as exc:
            raise EnsembleError(f"{where}: {exc}") from None
        members.append(
            Member(
                index=i,
                path=Path(path),
                manifest=manifest,
                config=config,
                memory_dim=_last_dim(manifest, "encoder", spec.MEMORY, where),
                keys_dim=_last_dim(manifest, "encoder", spec.KEYS, where),
                states=tuple(state_name(i, s) for s in config.state_names),
            )
        )
    return members


def _tokenizer_files(manifest: dict) -> dict[str, str]:
    return {
        f: h
        for f, h in manifest["files"].items()
        if f not in (spec.ENCODER_FILE, spec.DECODER_FILE)
    }


def validate(members: Sequence[Member], weights: Sequence[float], combine: str) -> None:
    """Refuse, by name, what one bundle cannot serve as an ensemble."""
    if combine not in COMBINE:
        raise EnsembleError(f"--combine {combine!r} is not one of {', '.join(COMBINE)}")
    if len(weights) != len(members):
        raise EnsembleError(f"{len(weights)} weights for {len(members)} bundles; give one each")
    # float32 is what the graph computes with: 1e-46 would be 0 there, 1e39 infinity
    bad = [w for w in weights if not (math.isfinite(w) and MIN_WEIGHT <= w <= MAX_WEIGHT)]
    if bad:
        raise EnsembleError(
            f"weights must be numbers from {MIN_WEIGHT:g} to {MAX_WEIGHT:g}, got {bad[0]!r}"
        )
    first = members[0]
    files = sorted({f for m in members for f in _tokenizer_files(m.manifest)})
    want = _facts(first, files)
    for i, m in enumerate(members[1:], start=2):
        for what, mine in _facts(m, files).items():
            if mine != want[what]:
                raise EnsembleError(
                    f"member {i} ({m.path}) and member 1 ({first.path}) differ in their "
                    f"{what} ({_short(mine)} vs {_short(want[what])}); an ensemble's members "
                    "must share them"
                )
    precision = first.manifest.get("precision", "fp32")
    if precision not in PRECISIONS:
        raise EnsembleError(
            f"{precision} members are not supported: make the ensemble of their fp32 bundles"
        )
    covered = [i + 1 for i, m in enumerate(members) if spec.COVERAGE in m.config.state_names]
    if len(covered) > 1:
        raise EnsembleError(
            f"members {covered[0]} and {covered[1]} both have coverage attention; an "
            "ensemble can hold at most one such member"
        )


def _facts(m: Member, files: Sequence[str]) -> dict[str, Any]:
    """What every member of an ensemble must share, by the name an error gives it
    (``files``: the tokenizer files of all members)."""
    mf = m.manifest
    ours = _tokenizer_files(mf)
    return {
        "precision": mf.get("precision", "fp32"),
        "source vocabulary size": m.config.src_vocab_size,
        "target vocabulary size": m.config.tgt_vocab_size,
        "special ids": mf["special_ids"],
        "tokenizers": mf.get(spec.TOKENIZERS_KEY, spec.LEGACY_TOKENIZERS),
        **{f"tokenizer file {f} (sha256)": ours.get(f, "missing")[:12] for f in files},
        "decoding defaults": mf.get("decoding", {}),
    }


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


def ensemble_config(members: Sequence[Member]) -> spec.BundleConfig:
    """The ensemble's decoding contract: the members' ids, all their states, the
    strictest of their length rules."""
    first = members[0].config
    limits = [m.config.max_source_tokens for m in members if m.config.max_source_tokens]
    return spec.BundleConfig(
        src_vocab_size=first.src_vocab_size,
        tgt_vocab_size=first.tgt_vocab_size,
        pad_id=first.pad_id,
        unk_id=first.unk_id,
        bos_id=first.bos_id,
        eos_id=first.eos_id,
        state_names=tuple(s for m in members for s in m.states),
        exact_lengths=any(m.config.exact_lengths for m in members),
        max_source_tokens=min(limits) if limits else None,
    )


def write_ensemble(
    paths: Sequence[Path | str],
    out: Path | str,
    *,
    weights: Sequence[float] | None = None,
    combine: str = "log-linear",
    renormalize: bool = False,
    force: bool = False,
    parity_src: Path | None = None,
    parity_limit: int | None = None,
    beam_sentences: int = 200,
    name: str | None = None,
    max_source_tokens: int | None = None,
) -> dict:
    """Compose the bundles at ``paths`` into one ensemble bundle in ``out``, gated; returns
    the manifest. ``weights``: one per member (default 1 each for log-linear, as Marian,
    1/n for linear, as fairseq; linear's are scaled to sum to 1); ``renormalize``:
    ``log_softmax`` of the combination each step (Eole's and OpenNMT-py >= 3.0.3's
    ensembles); ``max_source_tokens``: at most the members' least."""
    from export.ensemble_gate import run_ensemble_gate
    from export.ensemble_graphs import compose_decoder, compose_encoder
    from export.user import parity_ids
    from service.bundle import load_host_bundle, sha256_file

    out = Path(out)
    members = read_members([Path(p) for p in paths])
    if weights is None:
        weights = (
            [1.0] * len(members) if combine == "log-linear" else [1.0 / len(members)] * len(members)
        )
    weights = [float(w) for w in weights]
    validate(members, weights, combine)
    if combine == "linear":  # a mixture of probabilities: its weights sum to 1
        weights = [w / sum(weights) for w in weights]
    config = ensemble_config(members)
    limit = config.max_source_tokens
    if max_source_tokens is not None:
        if limit is not None and max_source_tokens > limit:
            raise EnsembleError(
                f"--max-source-tokens {max_source_tokens} is above what the members were "
                f"verified for ({limit})"
            )
        limit = max_source_tokens
    for m in members:  # --force replaces --out whole: never over (or in) a member
        mine, target = m.path.resolve(), out.resolve()
        if target == mine or mine in target.parents or target in mine.parents:
            raise EnsembleError(
                f"--out {out} is member {m.index + 1}'s directory, inside it or holds it; "
                "write the ensemble elsewhere"
            )
    if (problem := out_problem(out, force)) is not None:
        raise EnsembleError(problem)
    first = load_host_bundle(members[0].path, "cpu")  # its tokenizer; no sessions needed
    sources, source_name = parity_ids(first.src_tokenizer, config, parity_src, parity_limit)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = staging_dir(out.parent)
    try:
        started = time.monotonic()
        log.info("composing the members' encoders and decoder steps")
        compose_encoder(members, tmp / spec.ENCODER_FILE)
        compose_decoder(members, weights, combine, tmp / spec.DECODER_FILE, renormalize)
        files = [spec.ENCODER_FILE, spec.DECODER_FILE]
        for f in _tokenizer_files(members[0].manifest):
            shutil.copy(members[0].path / f, tmp / f)
            files.append(f)
        report = run_ensemble_gate(
            members, tmp, config, weights, combine, sources, renormalize=renormalize,
            beam_sentences=beam_sentences, max_len=limit or 128,
        )  # fmt: skip
        m0 = members[0].manifest
        manifest = {
            "format": spec.BUNDLE_FORMAT,
            "name": name or out.parent.name,
            "version": out.name,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "precision": m0.get("precision", "fp32"),
            "model_config": {
                "ensemble": {"combine": combine, "weights": weights, "renormalize": renormalize},
                "members": [m.manifest.get("model_config", {}) for m in members],
            },
            "parameters": sum(int(m.manifest.get("parameters", 0)) for m in members),
            **config.manifest_fields(),
            spec.TOKENIZERS_KEY: m0.get(spec.TOKENIZERS_KEY, spec.LEGACY_TOKENIZERS),
            "max_source_tokens": limit,
            "decoding": m0.get("decoding", {}),
            "opset": spec.OPSET,
            "graphs": {
                "encoder": graph_io(tmp / spec.ENCODER_FILE),
                "decoder": graph_io(tmp / spec.DECODER_FILE),
            },
            "versions": _versions(),
            "source_model": {
                "framework": "ensemble",
                "combine": combine,
                "weights": weights,
                "renormalize": renormalize,
                "members": [_provenance(m) for m in members],
            },
            "parity": report.to_dict() | {"source": source_name, "reference": "members"},
            "variant": None,
            "export_seconds": round(time.monotonic() - started, 1),
            "files": {f: sha256_file(tmp / f) for f in files},
        }
        install(tmp, out, manifest)
        return manifest
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _provenance(m: Member) -> dict[str, Any]:
    """Where a member came from: enough to find and verify it again."""
    mf = m.manifest
    return {
        "path": str(m.path),
        "name": mf.get("name"),
        "version": mf.get("version"),
        "source_model": mf.get("source_model"),
        "checkpoint": mf.get("checkpoint", {}).get("file") if mf.get("checkpoint") else None,
        "files": {f: mf["files"][f] for f in (spec.ENCODER_FILE, spec.DECODER_FILE)},
    }


def _versions() -> dict[str, str]:
    import onnx
    import onnxruntime

    return {
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "numpy": np.__version__,
        "exporter": "rnn-nmt-serving ensemble/1",
    }
