"""Glossaries (:mod:`nmt_client.glossary`): reading the file, matching source terms."""

from __future__ import annotations

import pytest

from nmt_client.glossary import Glossary, GlossaryError


def test_terms_are_matched_as_whole_words_in_any_case_in_source_order(tmp_path):
    path = tmp_path / "g.tsv"
    path.write_text(
        "# comment\n\nvisiting team\tequipo visitante\nhouse\tcasa\nHome\tcasa\ncat\tgato\n",
        encoding="utf-8",
    )
    g = Glossary.from_file(path)
    assert g.entries[0] == ("visiting team", "equipo visitante")
    assert g.terms_for("My house, the VISITING  team's home.") == ["casa", "equipo visitante"]
    assert g.terms_for("A houseboat and a category.") == []  # whole words only
    assert g.terms_for("The cat.") == ["gato"]
    assert g.terms_for("") == []


@pytest.mark.parametrize(
    "text, match",
    [
        ("house\tcasa\nno tab\n", r"g\.tsv:2: expected 'source term<TAB>target term'"),
        ("house\tcasa\textra\n", r"g\.tsv:1: expected"),
        ("house\t \n", r"g\.tsv:1: expected"),
        ("# only a comment\n\n", r"has no entries"),
    ],
)
def test_a_bad_glossary_names_its_line(tmp_path, text, match):
    path = tmp_path / "g.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(GlossaryError, match=match):
        Glossary.from_file(path)


def test_an_unreadable_glossary_is_named(tmp_path):
    with pytest.raises(GlossaryError, match=r"cannot read the glossary .*missing\.tsv"):
        Glossary.from_file(tmp_path / "missing.tsv")
    bad = tmp_path / "latin1.tsv"
    bad.write_bytes("caf\xe9\tcafé\n".encode("latin-1"))
    with pytest.raises(GlossaryError, match="cannot read the glossary"):
        Glossary.from_file(bad)
