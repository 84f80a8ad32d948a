"""The Apertium-translated corpus builder (``nmt-data``) and its English sources."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess

import pytest

from models import corpus, sources
from models.corpus import (
    CorpusError,
    check_tools,
    clean_pairs,
    exclusion_key,
    normalize,
    sentence_case,
    split_gloss,
    split_pairs,
    wordnet_sentences,
    write_split,
)

HEADER = (
    "  1 This software and database is being provided to you, the LICENSEE, by  \n"
    "  2 Princeton University under the following license. | By obtaining, using  \n"
    "  3   \n"
)
FAKE_WORDNET = {
    "data.noun": HEADER
    + "00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 | that which is perceived or known "
    "or inferred to have its own distinct existence (living or nonliving)  \n"
    '09917593 18 n 02 child 0 kid 0 | a young person of either sex; "she writes books for '
    'children"; "they\'re just kids"  \n',
    "data.verb": HEADER
    + "00001740 29 v 04 breathe 0 take_a_breath 0 | draw air into, and expel out of, the "
    'lungs; "I can breathe better when the air is clean"; "The patient is respiring"  \n',
    "data.adj": HEADER + "00001740 00 a 01 able 0 | (usually) large  \n"
    "00002098 00 a 01 young 0 | a young person of either sex  \n",
    "data.adv": HEADER
    + '00001740 02 r 01 a_cappella 0 000 | without musical accompaniment; "they performed a '
    'cappella"  \n',
}


@pytest.fixture
def wordnet_dir(tmp_path):
    root = tmp_path / "wordnet"
    root.mkdir()
    for name, text in FAKE_WORDNET.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


# More glosses in plain words Apertium knows, so an end-to-end build has enough pairs for a
# valid/test split and SentencePiece training. (definition, example) per synset.
EXTRA_GLOSSES = {
    "data.noun": [
        ("a domestic animal that lives with people", "the dog is sleeping in the garden"),
        ("a large building where many people work", "the city has a big market near the river"),
        ("a book that tells a long story", "my sister reads a new book every week"),
        ("a place where children learn to read and write", "the teacher opened the door"),
    ],
    "data.verb": [
        ("move fast on foot", "the boy runs to the house after school"),
        ("eat food in the evening", "we eat dinner with our family at home"),
        ("give money for goods or work", "she paid the bill at the small shop"),
        ("speak to another person about something", "they talked about the weather"),
        ("make a picture with a pencil or a pen", "he draws a tree and a red car"),
        ("put water on plants in the garden", "the old man waters the flowers every morning"),
    ],
}


@pytest.fixture
def corpus_wordnet_dir(wordnet_dir):
    """The fake WordNet plus EXTRA_GLOSSES: 29 sentences, 26 translated without unknown words."""
    for name, glosses in EXTRA_GLOSSES.items():
        pos = name.split(".")[1][0]
        lines = [
            f'{10000000 + i:08d} 00 {pos} 01 word{i} 0 000 | {definition}; "{example}"  \n'
            for i, (definition, example) in enumerate(glosses)
        ]
        with open(wordnet_dir / name, "a", encoding="utf-8") as fh:
            fh.writelines(lines)
    return wordnet_dir


def test_split_gloss_real_gloss() -> None:
    gloss = (
        'a young person of either sex; "she writes books for children"; '
        '"they\'re just kids"; "`tiddler\' is a British term for youngsters"  \n'
    )
    assert list(split_gloss(gloss)) == [
        "a young person of either sex",
        "she writes books for children",
        "they're just kids",
        "`tiddler' is a British term for youngsters",
    ]


def test_split_gloss_keeps_semicolons_inside_quotes() -> None:
    gloss = 'of the  period;  "in 200 CE; not  later";;  '
    assert list(split_gloss(gloss)) == ["of the period", "in 200 CE; not later"]


def test_normalize_and_sentence_case() -> None:
    assert normalize("  a \t b\n c  ") == "a b c"
    assert sentence_case("they're here") == "They're here"
    assert sentence_case("") == ""
    assert sentence_case("Already") == "Already"


def test_wordnet_sentences_from_fake_dir(wordnet_dir) -> None:
    assert wordnet_sentences(wordnet_dir) == [
        "That which is perceived or known or inferred to have its own distinct existence "
        "(living or nonliving)",
        "A young person of either sex",
        "She writes books for children",
        "They're just kids",
        "Draw air into, and expel out of, the lungs",
        "I can breathe better when the air is clean",
        "The patient is respiring",
        "Without musical accompaniment",
        "They performed a cappella",
    ]
    assert wordnet_sentences(wordnet_dir, min_words=4, max_words=4) == [
        "The patient is respiring",
        "They performed a cappella",
    ]


def test_check_tools_reports_missing_wordnet(tmp_path) -> None:
    with pytest.raises(CorpusError, match=r"WordNet data not found in .*apt-get install -y"):
        check_tools(tmp_path)


def test_clean_pairs_drops_marked_and_empty_and_dedupes() -> None:
    src = [
        "The dog is big.",
        "A  green  tree",
        "Unknown word here",
        "Generation error",
        "Transfer error",
        "The dog is big.",
        "Empty target",
        "",
        "Star * in source",
    ]
    tgt = [
        "El perro es grande.",
        "Un árbol  verde",
        "*Unknown palabra aquí",
        "#Generación error",
        "Error @de transferencia",
        "El perro es enorme.",
        "   ",
        "Vacío",
        "Estrella",
    ]
    assert clean_pairs(src, tgt) == [
        ("The dog is big.", "El perro es grande."),
        ("A green tree", "Un árbol verde"),
    ]
    with pytest.raises(ValueError):
        clean_pairs(["a", "b"], ["x"])


def test_split_pairs_deterministic_and_disjoint() -> None:
    pairs = [(f"sentence {i}", f"frase {i}") for i in range(30)]
    splits = split_pairs(pairs, valid=5, test=4)
    assert {k: len(v) for k, v in splits.items()} == {"test": 4, "valid": 5, "train": 21}
    seen = [p for part in splits.values() for p in part]
    assert len(seen) == len(set(seen)) == 30 and set(seen) == set(pairs)
    assert split_pairs(list(reversed(pairs)), valid=5, test=4) == splits
    assert split_pairs(pairs, valid=5, test=4, seed=7) != splits
    assert splits["train"] != sorted(splits["train"])  # shuffled, not just cut


def test_split_pairs_too_small() -> None:
    pairs = [(f"s{i}", f"t{i}") for i in range(10)]
    with pytest.raises(CorpusError, match=r"only 10 pairs; need more than valid \+ test = 10"):
        split_pairs(pairs, valid=5, test=5)
    assert len(split_pairs(pairs, valid=5, test=4)["train"]) == 1


def test_write_split_files(tmp_path) -> None:
    write_split(tmp_path / "out", {"train": [("a b", "c d")], "valid": [("e", "f"), ("g", "h")]})
    assert (tmp_path / "out" / "train.en").read_text(encoding="utf-8") == "a b\n"
    assert (tmp_path / "out" / "train.es").read_text(encoding="utf-8") == "c d\n"
    assert (tmp_path / "out" / "valid.es").read_text(encoding="utf-8") == "f\nh\n"


def test_apertium_realigns_when_paragraphs_merge(monkeypatch) -> None:
    """When Apertium joins paragraphs, the lines are re-translated in halves; a single
    line that still cannot be aligned becomes an empty translation."""
    calls = []

    def fake_run(cmd, *, input, capture_output, text, check):  # noqa: A002
        paras = input.rstrip("\n").split("\n\n")
        calls.append(paras)
        if "bad" in paras:
            out = " ".join(p.upper() for p in paras) + "\n" if len(paras) > 1 else "X\n\nY\n"
        else:
            out = "\n\n".join(p.upper() for p in paras) + "\n"
        return subprocess.CompletedProcess(cmd, 0, stdout=out, stderr="")

    monkeypatch.setattr(corpus.subprocess, "run", fake_run)
    assert corpus._apertium(["one", "bad", "three", "four"]) == ["ONE", "", "THREE", "FOUR"]
    assert calls[0] == ["one", "bad", "three", "four"]
    assert ["bad"] in calls


def test_apertium_translates_line_for_line(monkeypatch, wordnet_dir) -> None:
    check_tools(wordnet_dir)
    lines = [
        "The dog is big.",
        "She writes books for children",
        "A small red house near the river",
        "Without musical accompaniment",
        "I can breathe better when the air is clean",
    ]
    spanish = corpus._apertium(lines)
    assert len(spanish) == len(lines)
    assert spanish[0] == "El perro es grande."
    assert all(s and s == normalize(s) for s in spanish)
    monkeypatch.setattr(corpus, "CHUNK_LINES", 2)
    assert corpus.translate(lines, workers=2, progress=False) == spanish


def test_cli_spm_without_corpus(tmp_path, capsys) -> None:
    assert corpus.main(["spm", "--data", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("nmt-data: error: ")
    assert "train.en not found; run `nmt-data build` first" in lines[0]


def test_cli_spm_trains_tokenizers(tmp_path, sample_lines, capsys) -> None:
    en, es = sample_lines
    (tmp_path / "train.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    (tmp_path / "train.es").write_text("\n".join(es) + "\n", encoding="utf-8")
    assert corpus.main(["spm", "--data", str(tmp_path), "--vocab-size", "120"]) == 0
    assert (tmp_path / "spm.en.model").is_file() and (tmp_path / "spm.es.model").is_file()
    assert capsys.readouterr().err == ""


def test_cli_requires_a_command() -> None:
    with pytest.raises(SystemExit) as info:
        corpus.main([])
    assert info.value.code == 2


def _read(path):
    return path.read_text(encoding="utf-8").splitlines()


def _build_args(out, wordnet, *extra):
    return [
        "build",
        "--out",
        str(out),
        "--wordnet-dir",
        str(wordnet),
        "--sources",
        "wordnet",
        *extra,
    ]


def test_cli_build_end_to_end(tmp_path, corpus_wordnet_dir, capsys) -> None:
    """`nmt-data build` on a fake WordNet with real Apertium and SentencePiece."""
    small = ("--valid", "2", "--test", "3", "--vocab-size", "80")
    assert corpus.main(_build_args(tmp_path / "a", corpus_wordnet_dir, *small)) == 0
    stats = dict(kv.split("=") for kv in capsys.readouterr().out.split())
    stats = {k: int(v) for k, v in stats.items()}
    assert stats["english"] == 29
    assert stats["kept"] >= 20  # a few fake glosses have words Apertium does not know
    assert (stats["valid"], stats["test"]) == (2, 3)
    assert stats["train"] + stats["valid"] + stats["test"] == stats["kept"]

    out = tmp_path / "a"
    sides = {}
    for split in ("train", "valid", "test"):
        en, es = _read(out / f"{split}.en"), _read(out / f"{split}.es")
        assert len(en) == len(es) == stats[split]
        assert all(en) and all(es)
        assert not any(corpus.UNKNOWN_MARKS.search(line) for line in en + es)
        sides[split] = set(en)
    assert not (sides["train"] & sides["valid"] or sides["train"] & sides["test"])
    assert not sides["valid"] & sides["test"]
    assert (out / "spm.en.model").is_file() and (out / "spm.es.model").is_file()

    # Same inputs, same corpus: byte-identical split files in a second output dir.
    assert corpus.main(_build_args(tmp_path / "b", corpus_wordnet_dir, *small)) == 0
    for split in ("train", "valid", "test"):
        for side in ("en", "es"):
            name = f"{split}.{side}"
            assert (tmp_path / "b" / name).read_bytes() == (out / name).read_bytes(), name


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_cli_build_bad_wordnet_dir(tmp_path, capsys, make) -> None:
    wordnet = tmp_path / "wordnet"
    if make == "empty":
        wordnet.mkdir()
    assert corpus.main(_build_args(tmp_path / "out", wordnet)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"nmt-data: error: WordNet data not found in {wordnet} ")
    assert "--wordnet-dir" in lines[0]
    assert not (tmp_path / "out").exists()


def test_cli_build_without_apertium(tmp_path, wordnet_dir, capsys, monkeypatch) -> None:
    real_which = shutil.which
    monkeypatch.setattr(
        corpus.shutil, "which", lambda cmd, *a, **k: None if cmd == "apertium" else real_which(cmd)
    )
    assert corpus.main(_build_args(tmp_path / "out", wordnet_dir)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert lines == [
        "nmt-data: error: apertium is not installed; "
        "run: apt-get install -y apertium apertium-eng-spa wordnet-base"
    ]
    assert not (tmp_path / "out").exists()


def test_cli_spm_vocab_too_large(tmp_path, sample_lines, capsys) -> None:
    en, es = sample_lines
    (tmp_path / "train.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    (tmp_path / "train.es").write_text("\n".join(es) + "\n", encoding="utf-8")
    assert corpus.main(["spm", "--data", str(tmp_path), "--vocab-size", "50000"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("nmt-data: error: SentencePiece training on ")
    assert "--vocab-size 50000" in lines[0]


# --- the wider corpus: sources, filters, test-set exclusion --------------------------------

FAKE_FORTUNES = {
    "fortunes": "You will meet a tall dark stranger.\n"
    "%\n"
    "Never put off until tomorrow what you can do today.  Or the day after.\n"
    "\t\t-- Mark Twain\n"
    "%\n"
    "See http://www.example.com/ for details.\n"
    "%\n"
    "Q:\tHow many engineers does it take?\n"
    "A:\tTWO, obviously.\n"
    "%\n"
    "It's the people I tell them to that can't keep them. -Anthony Haden-Guest\n"
    "%\n",
    "literature": "The dog is sleeping in the garden.\n%\n",
    "riddles": "Why did the chicken cross the road?\n%\n",
}
FAKE_DING = (
    "# Version :: 1.9\n"
    "Hund {m} | Hunde {pl} :: dog | dogs\n"
    "Das ist doch nicht möglich. :: That really isn't possible.\n"
    "Er diente als Dolmetscher. :: He served/functioned as an interpreter.\n"
    "Es ist (jetzt) angekommen. :: It has (now) finally arrived [coll.].\n"
    "Sie sind unterwegs. :: The soldiers are homeward bound.; They are on their way home.\n"
    "Ich weiß. :: I know she’s right.\n"
    "Das Wetter ist schön. :: The dog is sleeping in the garden.\n"
)


@pytest.fixture
def fortunes_dir(tmp_path):
    root = tmp_path / "fortunes"
    root.mkdir()
    for name, text in FAKE_FORTUNES.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def ding_file(tmp_path):
    path = tmp_path / "de-en"
    path.write_text(FAKE_DING, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "text",
    [
        "I like apples.",
        "Do you speak English?",
        "She didn't come home, so we waited.",
        "My well-known uncle was born in 1990!",
        "Wet  paint!",  # two words; spaces normalised by the caller
    ],
)
def test_plain_sentence_accepts(text) -> None:
    assert sources.plain_sentence(normalize(text))


@pytest.mark.parametrize(
    "text",
    [
        "Hello.",  # one word
        "This sentence has far too many words to be one of the short plain sentences.",
        "see the manual.",  # lower-case start
        "It works",  # no final punctuation
        "Visit http://example.com today.",  # URL
        "Run make install now.;",
        "Set x = 1 in the config file.",  # code
        "Use the --force option.",
        "The GNU project is FREE.",  # all caps
        "Buy an iPhone today.",  # inner capital
        'He said "no" twice.',  # quotes
        "It costs $5 each.",
        "Call me - maybe.",  # loose dash
        "Version 1.2 is out.",  # inner full stop
        "Type 3rd or 2x.",  # digits glued to letters
        "E.g. this one.",
        "Wait... what?",
        "Is it a question?!",
        "Supercalifragilisticexpialidocious is long.",
    ],
)
def test_plain_sentence_rejects(text) -> None:
    assert not sources.plain_sentence(text)


def test_plain_sentence_without_proper_nouns() -> None:
    assert sources.plain_sentence("Please read the Debian manual.")
    assert not sources.plain_sentence("Please read the Debian manual.", proper_nouns=False)
    assert sources.plain_sentence("I think I'm right.", proper_nouns=False)
    assert not sources.plain_sentence("I saw him.", min_words=4)


def test_split_sentences() -> None:
    text = '"Come in," she said.  He did!  Why? (Nobody knew.) "It was late."'
    sentences = list(sources.split_sentences(text))
    assert sentences == ['Come in," she said.', "He did!", "Why?", "Nobody knew.", "It was late."]
    assert not sources.plain_sentence(sentences[0])  # a quote inside: left out


def test_fortune_sentences(fortunes_dir) -> None:
    assert list(sources.fortune_sentences(fortunes_dir, ["fortunes"])) == [
        "You will meet a tall dark stranger.",
        "Never put off until tomorrow what you can do today.",
        "Or the day after.",
        "It's the people I tell them to that can't keep them.",
    ]


def test_ding_sentences(ding_file) -> None:
    assert list(sources.ding_sentences(ding_file)) == [
        "That really isn't possible.",
        "He served as an interpreter.",
        "It has finally arrived.",
        "The soldiers are homeward bound.",
        "They are on their way home.",
        "I know she's right.",
        "The dog is sleeping in the garden.",
    ]


def test_doc_paragraphs_skip_code_and_markup(tmp_path) -> None:
    text = (
        "# Title\n\nThis tool is small.\nIt does one thing.\n\n"
        "```\nSome code here.\n```\n    Indented code line.\n* A list item here.\n"
        "Last words are here.\n"
    )
    assert list(sources.doc_paragraphs(text)) == [
        "This tool is small. It does one thing.",
        "Last words are here.",
    ]
    pkg = tmp_path / "doc" / "tool"
    pkg.mkdir(parents=True)
    (pkg / "README.md").write_text(text + "\nPlease read the Debian manual.\n", encoding="utf-8")
    (pkg / "changelog").write_text("Nothing is read here.\n", encoding="utf-8")
    with gzip.open(pkg / "notes.txt.gz", "wt", encoding="utf-8") as fh:
        fh.write("The notes are compressed.\n")
    assert list(sources.doc_sentences(tmp_path / "doc")) == [
        "This tool is small.",
        "It does one thing.",
        "Last words are here.",
        "The notes are compressed.",
    ]


def test_exclusion_key() -> None:
    assert exclusion_key("Hello, how are you?") == exclusion_key("hello how  are you")
    assert exclusion_key("It’s  late!") == exclusion_key("it's late") == "it s late"
    assert exclusion_key("Good morning!") != exclusion_key("Good evening!")


def test_collect_dedupes_excludes_and_limits(wordnet_dir, fortunes_dir, ding_file) -> None:
    paths = {"wordnet": wordnet_dir, "fortunes-min": fortunes_dir, "ding": ding_file}
    exclude = {exclusion_key("They're just kids"), exclusion_key("why did the chicken cross")}
    exclude.add(exclusion_key("Why did the chicken cross the road"))
    english, origin, stats = corpus.collect(
        ["wordnet", "fortunes-min", "ding"], paths, exclude=exclude
    )
    assert "They're just kids" not in english
    assert "Why did the chicken cross the road?" not in english
    # The Ding copy of a fortune is a duplicate: the earlier source keeps it.
    assert origin[english.index("The dog is sleeping in the garden.")] == "fortunes-min"
    assert stats["wordnet"] == {"candidates": 9, "excluded": 1, "duplicates": 0, "sentences": 8}
    assert stats["fortunes-min"] == {
        "candidates": 6,
        "excluded": 1,
        "duplicates": 0,
        "sentences": 5,
    }
    assert stats["ding"] == {"candidates": 7, "excluded": 0, "duplicates": 1, "sentences": 6}
    assert len(english) == len(origin) == 8 + 5 + 6
    keys = [exclusion_key(s) for s in english]
    assert len(keys) == len(set(keys))

    english, origin, stats = corpus.collect(["ding", "wordnet"], paths, exclude=set(), limit=2)
    assert english == [
        "That really isn't possible.",
        "He served as an interpreter.",
        "That which is perceived or known or inferred to have its own distinct existence "
        "(living or nonliving)",
        "A young person of either sex",
    ]
    assert origin == ["ding", "ding", "wordnet", "wordnet"]


def test_default_excludes_are_the_test_sets() -> None:
    keys, record = corpus.read_excludes(corpus.DEFAULT_EXCLUDES)
    assert [r["file"] for r in record] == [str(p) for p in corpus.DEFAULT_EXCLUDES]
    assert record[0]["file"].endswith("everyday/everyday.en")
    assert exclusion_key("The cat sat on the mat") in keys
    assert exclusion_key("My sister lives in a big city") in keys
    assert len(keys) > 2000


def test_read_excludes_missing_file(tmp_path) -> None:
    with pytest.raises(CorpusError, match=r"test set .*nope\.en not found"):
        corpus.read_excludes([tmp_path / "nope.en"])


def test_sources_registry() -> None:
    assert set(corpus.DEFAULT_SOURCES) <= set(corpus.SOURCES)
    assert corpus.DEFAULT_SOURCES[0] == "wordnet"
    assert "docs" not in corpus.DEFAULT_SOURCES  # machine-dependent: opt-in only
    for source in corpus.SOURCES.values():
        assert source.package and source.licence and source.description
        assert source.copyright.startswith("/usr/share/doc/")
    assert corpus.SOURCES["ding"].copyright == "/usr/share/doc/trans-de-en/copyright"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("wordnet,nope", "unknown source nope"),
        ("", "unknown source (none)"),
        ("wordnet,wordnet", "a source is named twice"),
    ],
)
def test_cli_bad_sources(tmp_path, capsys, value, message) -> None:
    with pytest.raises(SystemExit) as info:
        corpus.main(["build", "--out", str(tmp_path / "o"), "--sources", value])
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_cli_bad_source_dir(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        corpus.main(["build", "--out", str(tmp_path / "o"), "--source-dir", "nope=/x"])
    assert "expected NAME=PATH" in capsys.readouterr().err


def test_cli_build_missing_source(tmp_path, wordnet_dir, capsys) -> None:
    args = ["build", "--out", str(tmp_path / "out"), "--wordnet-dir", str(wordnet_dir)]
    args += ["--sources", "wordnet,fortunes-min", "--source-dir", f"fortunes-min={tmp_path}"]
    assert corpus.main(args) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"nmt-data: error: source fortunes-min not found in {tmp_path} (missing fortunes, "
        "literature, riddles); run: apt-get install -y --no-install-recommends fortunes-min, "
        "pass --source-dir fortunes-min=PATH, or leave fortunes-min out of --sources"
    ]
    assert not (tmp_path / "out").exists()


def test_cli_build_wider_mix(tmp_path, corpus_wordnet_dir, fortunes_dir, ding_file, capsys):
    """Several sources with real Apertium: test sentences never reach a split, and the
    manifest counts every source's sentences and names its package and licence."""
    tests = tmp_path / "tests.en"
    tests.write_text("my sister reads a new book every week!\nThey are on their way home\n")
    args = [
        "build", "--out", str(tmp_path / "out"), "--wordnet-dir", str(corpus_wordnet_dir),
        "--sources", "wordnet,fortunes-min,ding", "--source-dir", f"fortunes-min={fortunes_dir}",
        "--source-dir", f"ding={ding_file}", "--exclude", str(tests),
        "--valid", "2", "--test", "3", "--vocab-size", "80",
    ]  # fmt: skip
    assert corpus.main(args) == 0
    stats = {k: int(v) for k, v in (kv.split("=") for kv in capsys.readouterr().out.split())}
    assert stats["excluded"] == 2

    out = tmp_path / "out"
    english = {line for split in ("train", "valid", "test") for line in _read(out / f"{split}.en")}
    assert "My sister reads a new book every week" not in english
    assert "They are on their way home." not in english
    assert "You will meet a tall dark stranger." in english
    assert "That really isn't possible." in english

    record = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert record["command"].startswith("nmt-data build --out ")
    assert list(record["sources"]) == ["wordnet", "fortunes-min", "ding"]
    assert record["excluded_test_sets"] == [{"file": str(tests), "sentences": 2}]
    ding = record["sources"]["ding"]
    assert (ding["package"], ding["licence"][:6]) == ("trans-de-en", "GPL-2+")
    assert ding["copyright"] == "/usr/share/doc/trans-de-en/copyright"
    assert ding["excluded"] == 1 and ding["duplicates"] == 1
    for name, entry in record["sources"].items():
        assert entry["sentences"] == entry["candidates"] - entry["excluded"] - entry["duplicates"]
        assert entry["kept"] == entry["train"] + entry["valid"] + entry["test"], name
        assert entry["kept"] <= entry["sentences"]
    totals = record["totals"]
    assert totals["kept"] == stats["kept"] and totals["sentences"] == stats["english"]
    assert (totals["valid"], totals["test"]) == (2, 3)


def test_cli_build_oversamples_training_pairs_only(
    tmp_path, corpus_wordnet_dir, fortunes_dir, ding_file, capsys
):
    """--oversample repeats a source's training pairs; valid and test are never repeated,
    and SPLIT.origin names each line's source."""
    args = [
        "build", "--out", str(tmp_path / "out"), "--wordnet-dir", str(corpus_wordnet_dir),
        "--sources", "wordnet,ding", "--source-dir", f"ding={ding_file}",
        "--valid", "2", "--test", "3", "--vocab-size", "80", "--oversample", "ding=3",
    ]  # fmt: skip
    assert corpus.main(args) == 0
    stats = {k: int(v) for k, v in (kv.split("=") for kv in capsys.readouterr().out.split())}
    out = tmp_path / "out"
    record = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert record["oversample"] == {"ding": 3}
    ding, wordnet = record["sources"]["ding"], record["sources"]["wordnet"]
    assert ding["train"] > 0 and ding["train_lines"] == 3 * ding["train"]
    assert wordnet["train_lines"] == wordnet["train"]
    assert stats["train"] == ding["train_lines"] + wordnet["train_lines"]
    for split in ("train", "valid", "test"):
        en, es, origin = (_read(out / f"{split}.{ext}") for ext in ("en", "es", "origin"))
        assert len(en) == len(es) == len(origin)
        assert set(origin) <= {"wordnet", "ding"}
        if split != "train":
            assert len(set(en)) == len(en), split
    train = list(zip(*(_read(out / f"train.{ext}") for ext in ("en", "es", "origin")), strict=True))
    counts = {row: train.count(row) for row in train}
    assert {n for (_, _, origin), n in counts.items() if origin == "ding"} == {3}
    assert {n for (_, _, origin), n in counts.items() if origin == "wordnet"} == {1}


@pytest.mark.parametrize(
    ("value", "message"),
    [("ding", "expected NAME=TIMES"), ("ding=0", "TIMES a whole number >= 1"),
     ("nope=2", "NAME one of")],
)  # fmt: skip
def test_cli_bad_oversample(tmp_path, capsys, value, message) -> None:
    with pytest.raises(SystemExit) as info:
        corpus.main(["build", "--out", str(tmp_path / "o"), "--oversample", value])
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_oversample_of_a_source_not_built_is_refused(tmp_path, wordnet_dir, capsys) -> None:
    args = _build_args(tmp_path / "out", wordnet_dir, "--oversample", "ding=2")
    assert corpus.main(args) == 2
    assert "--oversample names ding, not among --sources" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_cli_build_excludes_the_everyday_set_by_default(tmp_path, corpus_wordnet_dir, capsys):
    """A WordNet example that is an everyday test sentence never reaches a split."""
    with open(corpus_wordnet_dir / "data.noun", "a", encoding="utf-8") as fh:
        fh.write('10009999 00 n 01 town 0 000 | a large town; "my sister lives in a big city"  \n')
    small = ("--valid", "2", "--test", "3", "--vocab-size", "80")
    assert corpus.main(_build_args(tmp_path / "out", corpus_wordnet_dir, *small)) == 0
    stats = {k: int(v) for k, v in (kv.split("=") for kv in capsys.readouterr().out.split())}
    assert stats["excluded"] == 1
    english = [
        line for s in ("train", "valid", "test") for line in _read(tmp_path / "out" / f"{s}.en")
    ]
    assert "A large town" in english
    assert not any(exclusion_key(line) == "my sister lives in a big city" for line in english)
