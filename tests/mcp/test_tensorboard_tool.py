"""get_tensorboard_run and diagnose(tensorboard=...) through the MCP SDK's real client, against a real
server process, on event files torch's SummaryWriter wrote during a real training."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.collectors.tensorboard_runs import make, stop_step
from tests.mcp.conftest import Server, text

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def nan_run(tmp_path_factory) -> Path:
    return make(tmp_path_factory.mktemp("tb"), "nan")["nan"]


def _call(server: Server, name: str, args: dict) -> tuple[bool, dict | None, str]:
    async def go() -> tuple[bool, dict | None, str]:
        async with server.client() as c:
            r = await c.call_tool(name, args)
            return bool(r.is_error), r.structured_content, text(r)

    return anyio.run(go)


def test_get_tensorboard_run_reads_the_series_and_finds_the_nan(nan_run, tmp_path):
    err, out, raw = _call(Server(tmp_path, roots=[nan_run.parent, tmp_path]), "get_tensorboard_run", {"path": str(nan_run)})
    assert not err, raw
    assert out["source"]["kind"] == "tensorboard"
    assert {s["name"] for s in out["trajectory"]["series"]} >= {"loss", "val_loss", "grad_norm", "lr"}
    onset = next(a for a in out["trajectory"]["anomalies"] if a["kind"] == "nan-onset")
    assert onset["step"] == stop_step(nan_run)


def test_diagnose_takes_tensorboard_as_its_target(nan_run, tmp_path):
    server = Server(tmp_path, roots=[nan_run.parent, tmp_path])
    err, out, raw = _call(server, "diagnose", {"tensorboard": str(nan_run)})
    assert not err, raw
    assert out["target_kind"] == "tensorboard" and out["primary_cause"] == "nan-inf"
    assert f"at step {stop_step(nan_run)} " in out["root_cause"]["proximate"]
    assert Path(out["report_path"]).parent == server.out


@pytest.mark.parametrize("tool, arg", [("get_tensorboard_run", "path"), ("diagnose", "tensorboard")])
def test_event_files_outside_the_roots_are_refused(nan_run, tmp_path, tool, arg):
    err, _, raw = _call(Server(tmp_path, roots=[tmp_path]), tool, {arg: str(nan_run)})
    assert err and "outside the allowed roots" in raw


def test_diagnose_refuses_tensorboard_with_another_target(nan_run, tmp_path):
    err, _, raw = _call(Server(tmp_path, roots=[nan_run.parent, tmp_path]), "diagnose",
                        {"tensorboard": str(nan_run), "mlflow": "abc"})
    assert err and "give exactly one of" in raw and "tensorboard" in raw
