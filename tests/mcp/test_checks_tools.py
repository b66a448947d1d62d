"""verify_artifacts and preflight_checks over a real MCP client: the gates, read-only."""

from __future__ import annotations

import anyio

from ..checks.test_provenance import make_version
from .conftest import ROOT, Server


def test_verify_artifacts_tool_passes_a_complete_version_and_fails_a_truncated_one(server: Server) -> None:
    v1 = make_version(server.tmp, "run-001", None)
    v2 = make_version(server.tmp, "run-002", v1)

    async def go() -> None:
        async with server.client() as c:
            ok = await c.call_tool("verify_artifacts", {"path": str(v2)})
            assert not ok.is_error and ok.structured_content["report"]["decision"] == "GO"
            w = v2 / "model.safetensors"
            w.write_bytes(w.read_bytes()[:-32])
            bad = (await c.call_tool("verify_artifacts", {"path": str(v2)})).structured_content["report"]
            assert bad["decision"] == "NO-GO"
            assert {ch["name"]: ch["verdict"] for ch in bad["checks"]}["weights"] == "fail"
            outside = await c.call_tool("verify_artifacts", {"path": "/etc"})
            assert outside.is_error

    anyio.run(go)


def test_preflight_checks_tool_reads_only_and_sees_a_producer_still_writing(server: Server) -> None:
    data = server.tmp / "shards"
    data.mkdir()
    (data / "shard-00000.bin").write_bytes(b"x" * 100)
    (data / "shard-00001.bin.tmp").write_bytes(b"x" * 10)  # a producer mid-write
    script = ROOT / "tests" / "checks" / "scenarios" / "good_train.py"

    async def go() -> None:
        async with server.client() as c:
            r = await c.call_tool("preflight_checks", {"script": str(script), "data": str(data), "expect_shards": 2,
                                                       "shard_pattern": "shard-*.bin"})
            assert not r.is_error
            rep = r.structured_content["report"]
            verdicts = {ch["name"]: ch["verdict"] for ch in rep["checks"]}
            assert verdicts["compile"] == "pass" and verdicts["checkpointing"] == "pass"
            assert verdicts["input completeness"] == "fail" and rep["decision"] == "NO-GO"
            assert "smoke run" not in verdicts  # the tool never executes the script

    anyio.run(go)
