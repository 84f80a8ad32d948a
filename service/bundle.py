"""Load an exported model bundle (manifest, graphs, tokenizers) without torch."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from export import spec
from export.spec import BundleConfig
from models.options import DecodeOptions, DecodeOptionsError
from models.tokenizer import TokenizerError, bundle_file, load_tokenizer, unk_id_of
from service import forced
from service.decoding import SpecialIds
from service.runtime import OnnxModel
from service.sessions import BundleRuntimeError, RuntimeConfig

log = logging.getLogger(__name__)


class BundleError(ValueError):
    """A directory that is not a loadable bundle; the message says what is wrong."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(bundle_dir: Path, *, verify: bool = True) -> dict[str, Any]:
    """Read and check ``manifest.json``; with ``verify`` every file's sha256 too."""
    path = bundle_dir / spec.MANIFEST_FILE
    if not path.is_file():
        raise BundleError(f"{bundle_dir} has no {spec.MANIFEST_FILE}; export one with nmt-export")
    try:
        manifest = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(manifest, dict):
        raise BundleError(f"{path} is not a JSON object; re-export the model with nmt-export")
    if manifest.get("format") != spec.BUNDLE_FORMAT:
        raise BundleError(
            f"{path}: format {manifest.get('format')!r} is not {spec.BUNDLE_FORMAT!r}; "
            "re-export the model with this version's nmt-export"
        )
    if manifest.get("opset") != spec.OPSET:
        raise BundleError(
            f"{path}: opset {manifest.get('opset')} but this service needs {spec.OPSET}"
        )
    files = manifest.get("files")
    if not isinstance(files, dict) or not {spec.ENCODER_FILE, spec.DECODER_FILE} <= set(files):
        raise BundleError(
            f"{path}: the manifest's 'files' must list every file with its sha256 (the graphs "
            "at least), or nothing is verified; re-export the model with nmt-export"
        )
    for name, expected in files.items():
        try:
            file = bundle_file(bundle_dir, name)
        except TokenizerError as exc:
            raise BundleError(f"{bundle_dir}: the manifest's files: {exc}") from None
        if not file.is_file():
            raise BundleError(f"{bundle_dir}: {name} listed in the manifest is missing")
        if verify and sha256_file(file) != expected:
            raise BundleError(f"{bundle_dir}: {name} does not match its sha256 in the manifest")
    return manifest


@dataclass
class Bundle:
    """A loaded bundle: graphs in ONNX Runtime plus tokenizers and metadata."""

    path: Path
    manifest: dict[str, Any]
    config: BundleConfig
    model: OnnxModel
    src_tokenizer: Any  # models.tokenizer.Tokenizer or models.words.WordTokenizer
    tgt_tokenizer: Any
    # The model's decoding defaults (the manifest's ``decoding``); a request's own options
    # override them: e.g. Eole's length rule and beam search for a converted Eole model.
    decoding: DecodeOptions = field(default_factory=DecodeOptions)

    @property
    def special(self) -> SpecialIds:
        return _special(self.config)

    @cached_property
    def target_index(self) -> dict[str, int]:
        """Target token (as :meth:`pieces` spells it) -> id, first id of a spelling."""
        tok = self.tgt_tokenizer
        index: dict[str, int] = {}
        for i, piece in enumerate(tok.pieces(range(tok.vocab_size))):
            index.setdefault(piece, i)
        return index

    @cached_property
    def source_unk_id(self) -> int:
        """The id the source tokenizer gives words it does not know. Not always the
        config's unk id, which is the target vocabulary's: a source vocabulary of its own
        (an Eole model's, d2l's) numbers its own; the config's for a tokenizer with none."""
        own = unk_id_of(self.src_tokenizer)
        return self.config.unk_id if own is None else own

    @cached_property
    def source_marks(self) -> tuple[int, int]:
        """How many start and end markers (``<sos>``, ``EOS``) the source tokenizer puts
        around every sentence's tokens: positions no text of the request wrote."""
        tok = getattr(self.src_tokenizer, "inner", self.src_tokenizer)
        return len(getattr(tok, "start_tokens", ())), len(getattr(tok, "end_tokens", ()))

    @cached_property
    def source_pad(self) -> str | None:
        """The token a source tokenizer pads every sentence with to a fixed width (after
        its end markers: TensorFlow's tutorial models), or None."""
        tok = getattr(self.src_tokenizer, "inner", self.src_tokenizer)
        return getattr(tok, "pad_token", None) if getattr(tok, "pad_to", 0) else None

    @property
    def max_source_tokens(self) -> int | None:
        """The longest source (in tokens) the export's parity gate verified, or None when
        the manifest does not say."""
        return self.config.max_source_tokens


# What a model's decoding defaults may set (a request that sets an option overrides
# them); the rest (attention, sampling, diverse searches) is each request's own choice.
DECODING_DEFAULTS = {
    # the beam a request that asks for none gets (strategy unset, or STRATEGY_BEAM with
    # beam_size 0), and its n-best list size (OpenNMT-tf's beam_width, num_hypotheses)
    "beam_size": int,
    "n_best": int,
    # unknown target tokens replaced in Translate (OpenNMT-tf's replace_unknown_target)
    "replace_unk": bool,
    "max_length": int,
    "max_length_ratio": float,
    "max_length_offset": int,
    "min_length": int,
    "length_penalty": float,
    "length_penalty_form": str,
    "search": str,
    "ban_unk": bool,
    "block_ngram_repeat": int,
    "prefix_scored": bool,
    "eos_at_limit": bool,
}


def _decoding(decoding: Any) -> DecodeOptions:
    """The manifest's decoding defaults, checked."""
    if not isinstance(decoding, dict):
        raise BundleError("the manifest's decoding defaults must be an object")
    for key, value in decoding.items():
        kind = DECODING_DEFAULTS.get(key)
        if kind is None:
            raise BundleError(
                f"the manifest's decoding defaults cannot set {key!r}; they may set "
                f"{', '.join(DECODING_DEFAULTS)}"
            )
        ok = isinstance(value, kind) or (kind is float and isinstance(value, int))
        if not ok or (kind is not bool and isinstance(value, bool)):
            raise BundleError(f"the manifest's decoding default {key} must be {kind.__name__}")
    try:
        return DecodeOptions(**decoding)
    except TypeError as exc:
        raise BundleError(f"the manifest's decoding defaults: {exc}") from None
    except DecodeOptionsError as exc:
        raise BundleError(f"the manifest's decoding defaults: {exc}") from None


def _check_graphs(graphs: dict | None, model: OnnxModel) -> None:
    """The graphs' input/output names must be those the manifest recorded at export."""
    if graphs is None:
        return
    for key, file, session in (
        ("encoder", spec.ENCODER_FILE, model.encoder),
        ("decoder", spec.DECODER_FILE, model.decoder),
    ):
        for side, values in (("inputs", session.get_inputs()), ("outputs", session.get_outputs())):
            want = sorted(v["name"] for v in graphs[key][side])
            # the output the service adds at load time (service.forced)
            have = sorted(v.name for v in values if v.name != forced.STEP_LOG_PROBS)
            if have != want:
                raise BundleError(
                    f"{file}'s {side} are not those the manifest records ({want}); "
                    "re-export the bundle"
                )


def _special(config: BundleConfig) -> SpecialIds:
    return SpecialIds(pad=config.pad_id, bos=config.bos_id, eos=config.eos_id, unk=config.unk_id)


def _host_parts(bundle_dir: Path, manifest: dict[str, Any]):
    """The manifest's config and the source and target tokenizers (raises KeyError,
    ValueError or TokenizerError)."""
    config = BundleConfig.from_manifest(manifest)
    specials = (config.pad_id, config.unk_id, config.bos_id, config.eos_id)
    entries = manifest.get(spec.TOKENIZERS_KEY, spec.LEGACY_TOKENIZERS)
    src_tok = load_tokenizer(entries["source"], bundle_dir, specials)
    tgt_tok = load_tokenizer(entries["target"], bundle_dir, specials)
    return config, src_tok, tgt_tok


def load_bundle(bundle_dir: Path | str, runtime: RuntimeConfig | None = None) -> Bundle:
    bundle_dir = Path(bundle_dir)
    if not bundle_dir.is_dir():
        raise BundleError(f"bundle directory not found: {bundle_dir}")
    manifest = read_manifest(bundle_dir)
    if bundle_dir.name.isdigit() and str(manifest.get("version")) != bundle_dir.name:
        # A repository's version is its directory's name (what the server chose it by and
        # logs); the manifest's is the --out directory's at export (a renamed or linked
        # bundle keeps that). Clients are told the one the server serves.
        log.info(
            "%s: served as version %s (its manifest says %r)",
            bundle_dir, bundle_dir.name, manifest.get("version"),
        )  # fmt: skip
        manifest["version"] = bundle_dir.name
    try:
        config, src_tok, tgt_tok = _host_parts(bundle_dir, manifest)
        config.check_vocabularies(src_tok.vocab_size, tgt_tok.vocab_size)
        model = OnnxModel(
            bundle_dir,
            config.state_names,
            runtime or RuntimeConfig(),
            exact_lengths=config.exact_lengths,
            pad_id=config.pad_id,
            target=(_special(config), config.tgt_vocab_size),
        )
        _check_graphs(manifest.get("graphs"), model)
        decoding = _decoding(manifest.get("decoding", {}))
    except (KeyError, ValueError, TokenizerError, BundleRuntimeError) as exc:
        raise BundleError(f"{bundle_dir}: {exc}") from None
    return Bundle(bundle_dir, manifest, config, model, src_tok, tgt_tok, decoding)


class RemoteModel:
    """``bundle.model`` of a bundle whose sessions run in another process
    (:func:`load_host_bundle`): what ListModels and the logs read."""

    def __init__(self, provider: str, forcing_error: str | None = None) -> None:
        self.provider = provider
        # as OnnxModel.forcing_error: why forced tokens cannot be scored, or None
        self.forcing_error = forcing_error


def load_host_bundle(bundle_dir: Path, provider: str) -> Bundle:
    """The parts of a bundle a gRPC process needs (manifest, tokenizers, decoding
    defaults), without ONNX Runtime sessions: those run in the engine process
    (``service/remote.py``), on ``provider``, which loaded and verified the bundle."""
    manifest = read_manifest(bundle_dir, verify=False)
    try:
        config, src_tok, tgt_tok = _host_parts(bundle_dir, manifest)
        decoding = _decoding(manifest.get("decoding", {}))
    except (KeyError, ValueError, TokenizerError) as exc:
        raise BundleError(f"{bundle_dir}: {exc}") from None
    model = RemoteModel(provider, forced.unsupported(bundle_dir / spec.DECODER_FILE))
    return Bundle(bundle_dir, manifest, config, model, src_tok, tgt_tok, decoding)
