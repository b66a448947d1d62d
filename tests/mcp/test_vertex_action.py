"""cancel-cloud-job through the real google-cloud-aiplatform client against the loopback Vertex AI fake."""

from __future__ import annotations

import anyio
import pytest
from ml_skills.collectors import gcp

from tests.fakes.vertex_api import VertexFake, load, pipeline_name
from tests.mcp.conftest import Server, answer


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    with VertexFake() as f:
        monkeypatch.setenv(gcp.VERTEX_ENV, f.endpoint)  # the server process inherits it
        monkeypatch.setenv(gcp.TIMEOUT_ENV, "5")
        yield f


def test_a_pipeline_is_cancelled_only_after_the_person_accepts(server: Server, fake: VertexFake) -> None:
    name = pipeline_name(load(fake, "quota"))
    args = {"action": {"kind": "cancel-cloud-job", "job": name}}

    async def ask(person) -> dict:
        async with server.client(elicit=person) as c:
            return (await c.call_tool("request_action", args)).structured_content

    declined = anyio.run(ask, answer("decline"))
    assert declined["outcome"] == "decline" and fake.cancelled == [] and not fake.calls_to("cancel")
    assert "aiplatform.PipelineJob.get" in declined["manual"]
    person = answer("accept")
    ran = anyio.run(ask, person)
    assert ran["outcome"] == "ran" and fake.cancelled == [name]
    assert name in person.shown[0] and "cancel-cloud-job" in ran["rule"]
    missing = dict(args, action={"kind": "cancel-cloud-job", "job": pipeline_name("9999")})
    failed = anyio.run(lambda: _call(server, missing))
    assert failed["outcome"] == "failed" and "no pipeline job" in failed["detail"] and fake.cancelled == [name]
    assert [e["outcome"] for e in server.audit_entries()] == ["asked", "decline", "asked", "starting", "ran", "asked", "starting", "failed"]


async def _call(server: Server, args: dict) -> dict:
    async with server.client(elicit=answer("accept")) as c:
        return (await c.call_tool("request_action", args)).structured_content


def test_describe_vertex_job_fences_the_error_text(server: Server, fake: VertexFake) -> None:
    name = pipeline_name(load(fake, "quota"))

    async def go():
        async with server.client() as c:
            return (await c.call_tool("describe_vertex_job", {"job": name})).structured_content

    r = anyio.run(go)
    assert r["source"]["state"] == "FAILED" and r["source"]["kind"].startswith("vertex")
    assert r["quoted"].startswith(f"[data {r['marker']}]") and "quota" in r["quoted"].lower()
