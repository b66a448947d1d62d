"""A planted secret of each kind never appears in any channel, whatever surrounds it (hypothesis).

Hypothesis picks the secret kinds and what surrounds each one: a word character or a URL-encoded
byte before it, URL-encoding (once or twice) of the keyword and value, an invisible character or
a terminal escape inside it, punctuation after it. The values are fresh fakes. A real Python
process prints the planted lines and dies of the planted error (one secret in the exception's
message), and a token is put in the log's file name. Then every channel is searched:

- the CLI, text and JSON: stdout, stderr and check-failed-run.json;
- the CLI under a pseudo-terminal: the progress line on stderr;
- a real MCP client over stdio: read_log_tail, read_log_window, grep_log, scan_log, diagnose,
  list_artifacts (text and structured content), and the report diagnose writes.

The quick property (the redactor alone, many more examples) runs first.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ml_skills.safety.redact import redact

from tests.conftest import run_cli
from tests.mcp.conftest import Server, text
from tests.security import fakes
from tests.security.figures import record
from tests.security.test_last_pass import run_cli_pty


def _opaque() -> str:
    return fakes.rand(fakes.ALNUM, 24)


# kind -> (keyword written before the value, value maker); an empty keyword means the token is recognised by its own shape.
KINDS: dict[str, tuple[str, Callable[[], str]]] = {
    "github": ("", fakes.github), "github-pat": ("", fakes.github_pat), "hf": ("", fakes.hf), "openai": ("", fakes.openai),
    "wandb-v1": ("", fakes.wandb_v1), "aws-key-id": ("", fakes.aws_key_id), "jwt": ("", fakes.jwt),
    "aws-secret": ("aws_secret_access_key=", fakes.aws_secret), "aws-secret-flag": ("--aws-secret-access-key ", fakes.aws_secret),
    "secret-key": ("secret_key: ", fakes.aws_secret), "password-flag": ("--password ", fakes.password),
    "query-token": ("?access_token=", _opaque), "query-api-key": ("&api_key=", _opaque), "header": ("X-API-KEY: ", _opaque),
    "wandb-hex": ("WANDB_API_KEY=", fakes.hex40), "wandb-flag": ("--wandb_key ", fakes.hex40),
    "netrc": ("machine api.wandb.ai login user password ", fakes.hex40), "bearer": ("Authorization: Bearer ", _opaque),
}
SHAPED = [k for k, (kw, _) in KINDS.items() if not kw]
BEFORE_TOKEN = ["", " ", "_", "x_", "GH_TOKEN_", "token", "%3D", "%253D", "Bearer%20", "'", '"', "(", "[", "=", ":", "\t", "/"]
BEFORE_KEYWORD = ["", " ", "'", '"', "(", "[", "\t", "{", ","]
AFTER = ["", " ", ".", ",", "&next=1", "%26x%3D1", "\x1b[0m", "'", '"', ")", " done"]
INSIDE = ["\u200b", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u202e", "\u2066", "\ufe0f", "\U000e0100", "\U000e0041",
          "\x1b[31m", "\x1b]8;;http://x\x07", "\x1b[2K", "\x7f", "\u2800", "\ufffd", "\x1bB"]  # the last three: sixty-sixth round


@dataclass
class Planted:
    kind: str
    secret: str
    unit: str  # what is written: surroundings, keyword, value

    def forms(self) -> list[str]:
        """The secret as it may appear in output: raw, URL-encoded once and twice, and 12-character pieces of the raw value."""
        s = self.secret
        return [s, quote(s, safe=""), quote(quote(s, safe=""), safe=""), *(s[i : i + 12] for i in range(0, len(s) - 11, 6))]


@st.composite
def planted(draw: st.DrawFn, kinds: list[str] | None = None) -> Planted:
    kind = draw(st.sampled_from(kinds or sorted(KINDS)))
    keyword, make = KINDS[kind]
    secret = make()
    core = keyword + secret
    encode = draw(st.sampled_from([0, 0, 1, 2])) if kind not in ("netrc", "password-flag") else 0
    for _ in range(encode):
        core = quote(core, safe="")
    if draw(st.booleans()):  # an invisible character or an escape anywhere inside, keyword included
        at = 1 + draw(st.integers(min_value=0, max_value=10_000)) % (len(core) - 1)  # values are fresh: their length varies
        core = core[:at] + draw(st.sampled_from(INSIDE)) + core[at:]
    before = draw(st.sampled_from(BEFORE_KEYWORD if keyword else BEFORE_TOKEN))
    return Planted(kind, secret, before + core + draw(st.sampled_from(AFTER)))


def _leaks(items: list[Planted], *channels: str) -> list[tuple[str, str]]:
    return [(p.kind, p.unit) for p in items for c in channels if any(f in c for f in p.forms())]


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(p=planted())
def test_the_redactor_alone_catches_every_planted_shape(p: Planted) -> None:
    line = f"2026-01-01 12:00:00 INFO launch {p.unit} rest of the line"
    assert _leaks([p], redact(line)) == []


def _real_run(run_dir: Path, lines: list[str], message: str) -> Path:
    """A real Python process prints the planted lines, then dies of a FloatingPointError whose message holds one more."""
    code = ("import sys, json\n"
            "lines, msg = json.load(open(sys.argv[1]))\n"
            "for i in range(300):\n"
            "    print(f'step {i} loss {2.0 - i / 1000:.4f} lr 0.0003')\n"
            "for x in lines:\n"
            "    print(x)\n"
            "raise FloatingPointError('Loss became infinite or NaN at iteration=300: ' + msg)\n")
    spec = run_dir / "planted.json"
    spec.write_text(json.dumps([lines, message]))
    log = run_dir / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "-c", code, str(spec)], check=False, stdout=out, stderr=subprocess.STDOUT, timeout=60,
                       env={"PYTHONIOENCODING": "utf-8", "PATH": "/usr/bin:/bin"})
    spec.unlink()
    return log


def _mcp_channels(tmp: Path, run_dir: Path, log: Path) -> list[str]:
    srv = Server(tmp, roots=[run_dir, tmp])
    calls = [("read_log_tail", {"path": str(log), "lines": 400}), ("read_log_window", {"path": str(log), "line": 300, "before": 5, "after": 40}),
             ("grep_log", {"path": str(log), "pattern": "[a-z]", "context": 1, "max_matches": 500}), ("scan_log", {"path": str(log)}),
             ("diagnose", {"target": str(log)}), ("list_artifacts", {"path": str(run_dir)})]

    async def go() -> list[str]:
        got = []
        async with srv.client() as c:
            for name, args in calls:
                r = await c.call_tool(name, args)
                assert not r.is_error, (name, text(r)[:500])
                got += [text(r), json.dumps(r.structured_content, ensure_ascii=False)]
        return got

    return [*anyio.run(go), (srv.out / "check-failed-run.json").read_text()]


FILE_SAFE = [b for b in BEFORE_TOKEN if "/" not in b]


@pytest.mark.slow
@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(items=st.lists(planted(), min_size=len(KINDS) // 2, max_size=len(KINDS)), in_message=planted(SHAPED),
       in_name=planted(SHAPED), name_before=st.sampled_from(FILE_SAFE))
def test_a_planted_secret_never_appears_in_any_channel(tmp_path_factory: pytest.TempPathFactory, items: list[Planted],
                                                      in_message: Planted, in_name: Planted, name_before: str) -> None:
    tmp = tmp_path_factory.mktemp("anych")
    name_unit = (name_before + in_name.secret).replace("/", "_")
    run_dir = tmp / f"run-{name_unit}"
    run_dir.mkdir()
    log = _real_run(run_dir, [f"[rank0] config: {p.unit}" for p in items], in_message.unit)
    assert all(p.unit.encode() in log.read_bytes() for p in items)  # the secrets really are in the log
    everything = [*items, in_message, Planted(in_name.kind, in_name.secret, name_unit)]

    channels: list[str] = []
    for fmt in ("text", "json"):
        out = tmp / f"out-{fmt}"
        proc = run_cli("check-failed-run", str(log), "--format", fmt, "--out-dir", str(out))
        assert proc.returncode == 0, proc.stderr[-2000:]
        channels += [proc.stdout, proc.stderr, (out / "check-failed-run.json").read_text()]
    stdout, terminal = run_cli_pty("check-failed-run", str(log), "--out-dir", str(tmp / "out-pty"))
    assert "scanning " in terminal  # the progress line was drawn on the terminal
    channels += [stdout, terminal, *_mcp_channels(tmp, run_dir, log)]
    assert json.loads(channels[5])["primary_cause"] == "nan-inf"

    assert _leaks(everything, *channels) == []
    record("secret instances planted", "any channel: hypothesis-built surroundings (CLI, pty, MCP)", len(everything))
    record("channels checked, no secret found", "any channel: CLI text/json, pty progress line, 6 MCP tools, reports", len(channels))
