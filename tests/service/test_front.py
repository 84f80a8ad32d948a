"""The request side of an engine (:class:`service.front.EngineFront`) on a word-vocabulary
bundle whose sources are wrapped in markers (bentrevett's ``<sos>`` ... ``<eos>``), with
the engine's answer given by the test: what ``replace_unk`` renders."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from export.spec import BundleConfig
from models.options import DecodeOptions, Hypothesis
from models.words import WordTokenizer
from service.bundle import Bundle
from service.front import EngineFront
from service.jobs import Job
from service.limits import EngineConfig

# pad, unk, bos, eos of the target; the source's own unk is 5 (its vocabulary differs)
SPECIAL_IDS = {"pad": 0, "unk": 1, "bos": 2, "eos": 3}
SOURCE = ["<pad>", "<sos>", "<eos>", "hello", "world", "<unk>"]
TARGET = ["<pad>", "<unk>", "<s>", "</s>", "la", "casa"]


def word_bundle() -> Bundle:
    """A bundle (no graphs) of word tokenizers, its source wrapped in ``<sos>``/``<eos>``."""
    src = WordTokenizer(SOURCE, unk_id=5, start_tokens=["<sos>"], end_tokens=["<eos>"])
    tgt = WordTokenizer(TARGET, unk_id=SPECIAL_IDS["unk"])
    config = BundleConfig(
        src_vocab_size=len(SOURCE),
        tgt_vocab_size=len(TARGET),
        pad_id=SPECIAL_IDS["pad"],
        unk_id=SPECIAL_IDS["unk"],
        bos_id=SPECIAL_IDS["bos"],
        eos_id=SPECIAL_IDS["eos"],
        state_names=("hidden",),
    )
    return Bundle(Path("word-bundle"), {}, config, None, src, tgt)


class AnsweringFront(EngineFront):
    """A front whose engine answers every sentence with ``hyps``."""

    def __init__(self, bundle: Bundle, hyps: list[Hypothesis]) -> None:
        self.bundle, self.max_source_tokens = bundle, 64
        self.config = EngineConfig().for_device(gpu=False)
        self.hyps = hyps

    def enqueue(
        self,
        sources,
        options,
        timeout=None,
        on_prefix=None,
        prefixes=(),
        constraints=(),
        draw_keys=(),
    ) -> Job:
        job = Job(sources, options, deadline=None)
        job.future.set_result([list(self.hyps) for _ in sources])
        return job


# "la <unk> <unk>" for "Hello Zyx world" (<sos> hello zyx world <eos>), its unknown
# tokens attending most to the markers: to <eos>, then zyx; to <sos>, then hello = world
TEXT = "Hello Zyx world"
MARKER_HYP = Hypothesis(
    tokens=(4, 1, 1),
    score=0.0,
    log_prob=0.0,
    attention=np.array(
        [
            [0.0, 0.9, 0.05, 0.05, 0.0],
            [0.1, 0.1, 0.3, 0.1, 0.4],
            [0.6, 0.2, 0.0, 0.2, 0.0],
            [0.0, 0.0, 0.0, 0.0, 1.0],
        ],
        dtype=np.float32,
    ),
)


def test_replace_unk_never_copies_a_source_marker():
    """Attention peaking on ``<eos>`` or ``<sos>`` copies the most attended real word."""
    bundle = word_bundle()
    assert bundle.src_tokenizer.surface(TEXT) == ["<sos>", "hello", "zyx", "world", "<eos>"]
    front = AnsweringFront(bundle, [MARKER_HYP])
    _, (result,) = front.translate([TEXT], DecodeOptions(replace_unk=True))
    ((rendered, pieces, _),) = result.hypotheses
    assert pieces == ["la", "zyx", "hello"]
    assert rendered == "la zyx hello"
    # without replace_unk the unknown tokens stay as the vocabulary spells them
    _, (plain,) = front.translate([TEXT], DecodeOptions())
    assert plain.hypotheses[0][0] == "la <unk> <unk>"


def test_replace_unk_without_a_server_never_copies_a_source_marker(monkeypatch):
    """``nmt-eval --bundle`` (:func:`service.offline.translate_with_bundle`) renders the same."""
    from nmt_api.nmt.v1 import translator_pb2 as pb
    from service import offline

    monkeypatch.setattr(offline, "load_bundle", lambda *args: word_bundle())
    monkeypatch.setattr(offline, "decode", lambda model, chunk, **_: [[MARKER_HYP]] * len(chunk))
    got = offline.translate_with_bundle(
        Path("word-bundle"), [TEXT], pb.DecodeOptions(replace_unk=True)
    )
    assert got == ["la zyx hello"]


def test_the_bundle_reads_the_source_tokenizers_unk_and_marks():
    bundle = word_bundle()
    assert (bundle.source_unk_id, bundle.config.unk_id) == (5, 1)
    assert bundle.source_marks == (1, 1)
    # a tokenizer without an unk id or markers of its own: the config's, none
    bare = Bundle(Path("bare"), {}, bundle.config, None, object(), bundle.tgt_tokenizer)
    assert (bare.source_unk_id, bare.source_marks) == (1, (0, 0))
