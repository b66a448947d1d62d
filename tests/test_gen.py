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


def test_tool_reference_matches_what_a_real_client_lists(tmp_path):
    """docs/tools.md names every tool, annotation, argument, resource and the prompt the server really serves."""
    import anyio

    from tests.mcp.conftest import Server

    async def listing():
        async with Server(tmp_path).client() as c:
            return (await c.list_tools()).tools, (await c.list_resources()).resources, (await c.list_prompts()).prompts

    tools, resources, prompts = anyio.run(listing)
    doc = (ROOT / "docs" / "tools.md").read_text()
    assert len(tools) >= 16
    for t in tools:
        a = t.annotations
        words = ", ".join(f"{w} {'yes' if v else 'no'}" for w, v in (("read-only", a.read_only_hint), ("destructive", a.destructive_hint),
                                                                      ("idempotent", a.idempotent_hint), ("open-world", a.open_world_hint)))
        section = doc.split(f"\n## {t.name}\n", 1)[1].split("\n## ", 1)[0]
        assert f"Annotations: {words};" in section, t.name
        for arg in t.input_schema.get("properties", {}):
            assert f"| `{arg}` |" in section, (t.name, arg)
        for field in (t.output_schema or {}).get("properties", {}):
            assert f"`{field}`" in section or field in ("status", "truncated", "redactions", "stripped_chars", "marker", "notes"), (t.name, field)
    for r in resources:
        assert f"| `{r.uri}` | {r.name} |" in doc
    for p in prompts:
        assert f"- `{p.name}` ({p.title})" in doc


def test_check_fails_when_the_tool_reference_drifts(tmp_path, capsys):
    assert gen.main(["--root", str(tmp_path)]) == 0
    assert gen.main(["--check", "--root", str(tmp_path)]) == 0
    doc = tmp_path / "docs" / "tools.md"
    doc.write_text(doc.read_text().replace("## read_remote_log\n", "## read_remote_file\n"))
    assert gen.main(["--check", "--root", str(tmp_path)]) == 1
    assert "docs/tools.md" in capsys.readouterr().err
