"""Forced target prefixes (:class:`service.strategies.Prefix`): on the scripted fake decoder
of ``test_decoding`` and, for parity with the PyTorch reference, on the committed bundle.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from models.options import DecodeOptions
from service.decoding import make_search
from service.errors import InvalidRequest
from service.limits import validate_prefixes
from service.loop import DecodeLoop
from service.strategies import BEAM, GREEDY, Prefix
from tests.committed import EN_ES_FP32
from tests.service.test_decoding import (
    EOS,
    SPECIAL,
    FakeStepModel,
    copy_table,
    random_sources,
    random_table,
    run,
    vector,
)

OPTIONS = [
    DecodeOptions(),
    DecodeOptions(beam_size=3, n_best=3),
    DecodeOptions(beam_size=3, n_best=2, search="eole"),
]


def test_make_search_wraps_the_strategy_only_with_a_prefix():
    assert make_search(4, DecodeOptions(), SPECIAL).strategy is GREEDY
    wrapped = make_search(4, DecodeOptions(), SPECIAL, prefix=[5]).strategy
    assert isinstance(wrapped, Prefix) and wrapped.inner is GREEDY
    beam = make_search(4, DecodeOptions(beam_size=2), SPECIAL, prefix=[5, 6]).strategy
    assert isinstance(beam, Prefix) and beam.inner is BEAM
    # one wrapper object per strategy: the loop groups prefixed sentences together
    assert make_search(3, DecodeOptions(), SPECIAL, prefix=[7]).strategy is wrapped


def test_a_prefix_with_no_room_for_eos_is_refused():
    options = DecodeOptions(max_length=3)
    make_search(10, options, SPECIAL, prefix=[4, 5])
    with pytest.raises(ValueError, match="no room for EOS"):
        make_search(10, options, SPECIAL, prefix=[4, 5, 6])


@pytest.mark.parametrize("options", OPTIONS, ids=["greedy", "beam3-n3", "eole3-n2"])
def test_every_hypothesis_starts_with_the_prefix(options):
    sources = random_sources(3, 12)
    prefixes = [tuple(4 + (i + j) % 6 for j in range(i % 4)) for i in range(len(sources))]
    got = run(random_table(5), sources, options, prefixes=prefixes)
    plain = run(random_table(5), sources, options)
    for prefix, hyps, free in zip(prefixes, got, plain, strict=True):
        assert hyps and len(hyps) == options.n_best or options.search == "eole"
        for h in hyps:
            assert h.tokens[: len(prefix)] == prefix
        if not prefix:  # no prefix: the plain search, exactly
            assert [h.tokens for h in hyps] == [h.tokens for h in free]


@pytest.mark.parametrize("options", OPTIONS[:2], ids=["greedy", "beam3-n3"])
def test_forced_tokens_add_their_own_log_probs(options):
    # copy_table gives every copied token -0.1 and EOS -0.1 at the end; the forced tokens
    # 9 and 8 are outside its script, far down the distribution (and outside the top-k)
    (got,) = run(copy_table, [(4, 5, 6)], options, prefixes=[(9, 8)])
    # after the prefix the fake continues its copy from position 2: token 6, then EOS
    assert got[0].tokens == (9, 8, 6)
    forced = float(vector(copy_table((4, 5, 6), ()))[9])
    forced += float(vector(copy_table((4, 5, 6), (9,)))[8])
    assert forced < -10
    assert got[0].log_prob == pytest.approx(forced - 0.2)
    assert got[0].token_log_probs is None  # a prefix, not a whole translation


def test_a_prefix_ending_with_eos_is_scored_not_searched():
    src = (4, 5, 6)
    (got,) = run(copy_table, [src], DecodeOptions(), prefixes=[(9, 8, EOS)])
    assert len(got) == 1 and got[0].tokens == (9, 8)
    want = [
        float(vector(copy_table(src, ()))[9]),
        float(vector(copy_table(src, (9,)))[8]),
        float(vector(copy_table(src, (9, 8)))[EOS]),
    ]
    assert got[0].token_log_probs == pytest.approx(want)
    assert got[0].log_prob == sum(got[0].token_log_probs)
    # the model's own translation scores as the search found it
    (free,) = run(copy_table, [src], DecodeOptions())
    (again,) = run(copy_table, [src], DecodeOptions(), prefixes=[(*free[0].tokens, EOS)])
    assert again[0].tokens == free[0].tokens
    assert again[0].log_prob == pytest.approx(free[0].log_prob)
    assert again[0].score == pytest.approx(free[0].score)


def test_eos_inside_a_prefix_or_past_the_limit_is_refused():
    with pytest.raises(ValueError, match="holds EOS before its end"):
        make_search(4, DecodeOptions(), SPECIAL, prefix=[5, EOS, 6])
    options = DecodeOptions(max_length=3)
    make_search(10, options, SPECIAL, prefix=[4, 5, EOS])  # three tokens, EOS counted
    with pytest.raises(ValueError, match="target prefix of 3 tokens exceeds the length limit"):
        make_search(10, options, SPECIAL, prefix=[4, 5, 6, EOS])


def test_prefixed_and_plain_sentences_share_steps():
    model = FakeStepModel(random_table(2))
    loop = DecodeLoop(model, SPECIAL)
    sources = [[4, 5, 6], [7, 8], [5, 5, 5, 5]]
    searches = [
        make_search(3, DecodeOptions(), SPECIAL, prefix=[9, 9]),
        make_search(2, DecodeOptions(beam_size=2), SPECIAL),
        make_search(4, DecodeOptions(beam_size=3, n_best=3), SPECIAL, prefix=[4]),
    ]
    loop.add(sources, searches, [0, 1, 2])
    done = {}
    while loop.active:
        for handle, search in loop.step():
            done[handle] = search.results()
    assert done[0][0].tokens[:2] == (9, 9)
    assert all(h.tokens[:1] == (4,) for h in done[2])
    assert all(h.tokens[-1:] != (EOS,) for hyps in done.values() for h in hyps)


def test_streaming_prefix_starts_with_the_prefix():
    loop = DecodeLoop(FakeStepModel(random_table(4)), SPECIAL)
    search = make_search(5, DecodeOptions(beam_size=3), SPECIAL, prefix=[6, 7, 8])
    loop.add([[4, 5, 6, 7, 8]], [search], ["x"])
    seen = []
    while loop.active:
        loop.step()
        seen.append(search.stable_prefix())
    # once the prefix is decoded, the stable text always starts with it
    assert all(p[:3] == (6, 7, 8) for p in seen[3:])
    assert seen[-1][:3] == (6, 7, 8)


# -- parity with the PyTorch reference on the committed bundle ---------------------

ROOT = Path(__file__).resolve().parents[2]
FP32 = EN_ES_FP32
TEST_SPLIT = ROOT / "models" / "pretrained" / "en-es" / "test.en"


@pytest.fixture(scope="module")
def fp32():
    from service.bundle import load_bundle
    from service.sessions import RuntimeConfig

    return load_bundle(FP32, RuntimeConfig(providers=("cpu",), intra_op_threads=1))


@pytest.fixture(scope="module")
def demo():
    torch = pytest.importorskip("torch")
    from models.checkpoint import load_checkpoint
    from models.translate import DEMO_CHECKPOINT

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield load_checkpoint(DEMO_CHECKPOINT)
    torch.set_num_threads(threads)


@pytest.mark.parametrize(
    "options",
    [DecodeOptions(), DecodeOptions(beam_size=4, n_best=3)],
    ids=["greedy", "beam4-n3"],
)
def test_prefix_matches_the_pytorch_reference(fp32, demo, options):
    import torch

    from models.search import beam_search, greedy_search
    from service.loop import decode

    texts = TEST_SPLIT.read_text(encoding="utf-8").splitlines()[0:1200:100]
    sources = [fp32.src_tokenizer.encode(t)[: fp32.max_source_tokens] for t in texts]
    plain = decode(fp32.model, sources, options=DecodeOptions(), special=fp32.special)
    # another sentence's translation start: rarely what the model would choose here
    prefixes = [plain[(i + 1) % len(sources)][0].tokens[: i % 4] for i in range(len(sources))]
    got = decode(fp32.model, sources, options=options, special=fp32.special, prefixes=prefixes)
    lengths = torch.tensor([len(s) for s in sources])
    src = torch.full((len(sources), int(lengths.max())), fp32.special.pad, dtype=torch.long)
    for i, s in enumerate(sources):
        src[i, : len(s)] = torch.tensor(s)
    if options.beam_size == 1:
        want = [
            [h] for h in greedy_search(demo.model, src, lengths, options=options, prefixes=prefixes)
        ]
    else:
        want = beam_search(demo.model, src, lengths, options=options, prefixes=prefixes)
    for prefix, g, w in zip(prefixes, got, want, strict=True):
        assert [h.tokens for h in g] == [h.tokens for h in w]
        for hg, hw in zip(g, w, strict=True):
            assert hg.tokens[: len(prefix)] == prefix
            assert hg.score == pytest.approx(hw.score, abs=1e-4)


# -- request validation -------------------------------------------------------------


class WordTokenizer:
    """Target tokenizer stand-in: one id per word, ``"·"`` tokenises to nothing."""

    def encode(self, text: str) -> list[int]:
        return [4 + len(w) for w in text.split() if w != "·"]


@pytest.mark.parametrize(
    ("text", "name"), [("a", "padding"), ("bb", "start"), ("ccc", "end-of-sentence")]
)
def test_a_prefix_holding_a_special_token_is_invalid(text, name):
    """Tokens no step produces (the graph ranks them at -inf; a word vocabulary spells
    them "<pad>", "<s>", "</s>"): a prefix with one is refused, never forced."""
    from service.decoding import SpecialIds

    special = SpecialIds(pad=5, bos=6, eos=7, unk=3)  # "a", "bb", "ccc" in WordTokenizer
    with pytest.raises(InvalidRequest, match=rf"target_prefix\[0\] tokenises to the {name} token"):
        validate_prefixes([f"dddd {text}"], [[4, 5]], DecodeOptions(), WordTokenizer(), special)
    fine = validate_prefixes(["dddd"], [[4, 5]], DecodeOptions(), WordTokenizer(), special)
    assert fine == [(8,)]


def test_validate_prefixes_aligns_with_the_texts():
    got = validate_prefixes(["a bb", ""], [[4, 5], [6]], DecodeOptions(), WordTokenizer())
    assert got == [(5, 6), ()]
    # fewer prefixes than texts: the rest have none
    assert validate_prefixes(["a"], [[4], [5]], DecodeOptions(), WordTokenizer()) == [(5,), ()]


@pytest.mark.parametrize(
    ("prefixes", "options", "match"),
    [
        (["a", "b", "c"], DecodeOptions(), r"3 target prefixes for 2 texts"),
        (["·"], DecodeOptions(), r"target_prefix\[0\] has no tokens"),
        (["", "a b c"], DecodeOptions(max_length=3), r"target_prefix\[1\] has 3 target tokens"),
        (
            ["a " * 13],
            DecodeOptions(),
            r"allows at most 11 before EOS",
        ),  # limit 2 * 1 + 10, EOS included
    ],
)
def test_impossible_prefixes_are_invalid(prefixes, options, match):
    with pytest.raises(InvalidRequest, match=match):
        validate_prefixes(prefixes, [[4], [5, 6]], options, WordTokenizer())


# -- over the wire: a real server, in process and with the engine in a child process ------

WIRE_PREFIX = "la casa"


@pytest.fixture(scope="module", params=["off", "on"], ids=["in-process", "engine-process"])
def prefix_server(request, server_factory):
    return server_factory(server={"engine_process": request.param})


def _pieces(tiny_bundle, text: str) -> tuple[str, ...]:
    from models.tokenizer import Tokenizer

    tok = Tokenizer.from_file(tiny_bundle.bundle_dir / "target.spm.model")
    return tuple(tok.pieces(tok.encode(text)))


@pytest.mark.parametrize("beam, n_best", [(1, 1), (4, 3)])
def test_every_served_hypothesis_starts_with_its_prefix(prefix_server, tiny_bundle, beam, n_best):
    from nmt_client import Translator

    texts = list(tiny_bundle.sentences[:3])
    forced = _pieces(tiny_bundle, WIRE_PREFIX)
    with Translator(f"127.0.0.1:{prefix_server.port}", timeout=60, retries=0) as t:
        results = t.translate(
            texts, beam_size=beam, n_best=n_best, target_prefix=[WIRE_PREFIX, "", WIRE_PREFIX]
        )
        plain = t.translate(texts[1:2], beam_size=beam, n_best=n_best)
    for i in (0, 2):
        assert len(results[i].hypotheses) == n_best
        for hyp in results[i].hypotheses:
            assert hyp.tokens[: len(forced)] == forced, hyp.tokens
    # A sentence without a prefix decodes as it would alone.
    assert [h.tokens for h in results[1].hypotheses] == [h.tokens for h in plain[0].hypotheses]


def test_a_streamed_translation_starts_with_its_prefix(prefix_server, tiny_bundle):
    from nmt_client import Translator

    forced = _pieces(tiny_bundle, WIRE_PREFIX)
    with Translator(f"127.0.0.1:{prefix_server.port}", timeout=60, retries=0) as t:
        updates = list(t.stream(tiny_bundle.sentences[0], target_prefix=WIRE_PREFIX))
    final = updates[-1]
    assert final.final and final.result.best.tokens[: len(forced)] == forced
    assert all(u.text.startswith(updates[0].text) for u in updates)


@pytest.mark.parametrize(
    "prefixes, match",
    [
        (["a", "b", "c", "d"], "4 target prefixes for 3 texts"),
        ([" ".join(["casa"] * 400), "", ""], r"target_prefix\[0\] has \d+ target tokens"),
    ],
)
def test_impossible_prefixes_are_invalid_argument(prefix_server, tiny_bundle, prefixes, match):
    from nmt_client import InvalidRequest, Translator

    address = f"127.0.0.1:{prefix_server.port}"
    with (
        Translator(address, timeout=60, retries=0) as t,
        pytest.raises(InvalidRequest, match=match),
    ):
        t.translate(list(tiny_bundle.sentences[:3]), target_prefix=prefixes)
