"""Generated files (taxonomy, JSON schema) must match the code that generates them."""

from ml_skills import gen

from .conftest import ROOT


def test_generated_files_are_in_sync():
    assert gen.main(["--check", "--root", str(ROOT)]) == 0, "run: python -m ml_skills.gen"


def test_taxonomy_lists_every_signature():
    text = gen.taxonomy_markdown()
    from ml_skills.catalog.loader import signatures

    for s in signatures():
        assert f"`{s.id}`" in text
