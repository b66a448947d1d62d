"""Issue 14's thirtieth round, promise 3 ("Secrets never leave the server"): the redactor's breaks (A01-A04, A11, A12,
A16). Each test gives the redactor, or the function a tool shows its text through, the tester's input shapes, with controls
that must stay as they are; each failed on the code before its fix (docs/security.md, "Thirtieth round")."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from ml_skills.safety import redact as r

GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


def _shown(text: str) -> tuple[str, int, int]:
    """`text` as redact() shows it, with the redactions and stripped characters it counted."""
    r.reset_redaction_count()
    r.reset_stripped_count()
    out = r.redact(text)
    return out, r.redaction_count(), r.stripped_count()


def _no_piece(secret: str, out: str, n: int = 12) -> None:
    for i in range(len(secret) - n + 1):
        assert secret[i:i + n] not in out, (secret[i:i + n], out)


# ---------------------------------------------------------------- A01: a combining mark inside a token


@pytest.mark.parametrize("marks", ["\u0301", "\u0301\u0302", "\u20dd"])
def test_a_token_split_by_a_combining_mark_never_leaves(marks: str) -> None:
    """A combining mark between two ASCII characters of a `ghp_` token, no keyword near, kept it whole: the zero-width
    characters were stripped and the token joined again, a mark was not. Read as absent for matching; the marks inside the
    secret go with its mask and are counted as stripped."""
    for token in (GHP, HF):
        out, n, gone = _shown(f"A01 gh cred: {token[:10]}{marks}{token[10:]} done")
        assert out == f"A01 gh cred: {r.MASK} done" and n == 1 and gone == len(marks), out
    out, n, _ = _shown(f"pas{marks}sword=Zq8vR2mKx9Secret")  # in the keyword too
    assert "Zq8vR2mKx9Secret" not in out and n == 1, out


def test_text_written_with_combining_marks_is_shown_as_it_is() -> None:
    """Controls: decomposed text (a macOS file name, `Re<U+0301>sume<U+0301>`) and marks around ordinary log words are
    only read without their marks; nothing of them is masked or stripped."""
    for text in ("saved /Users/ana/Re\u0301sume\u0301/ckpt-100.pt", "cafe\u0301s loss 2.31 step 400", "na\u0308ive lr=3e-4",
                 "commit 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b", "\u0915\u094d\u0937 tokens/s 1200"):
        assert _shown(text) == (text, 0, 0), text


# ---------------------------------------------------------------- A02, A03: an escaped invisible character inside a token


@pytest.mark.parametrize("split", ["\\u200b", "\\u200B", "\\\\u200b", "\\u00ad", "\\u2060", "\\udb40\\udc41",
                                   "&#8203;", "&#x200b;", "&#x200B;", "&ZeroWidthSpace;", "&zwj;", "\\u0301", "&#769;"])
def test_a_token_split_by_an_escaped_invisible_character_never_leaves(split: str) -> None:
    """A JSON escape (`"hf_AbCdE\\u200bfGh..."`, also escaped again) or an HTML character reference (`&#8203;`,
    `&ZeroWidthSpace;`) of an invisible character or a combining mark inside a token: only escapes of letters, digits and
    `_-.+/:=` were decoded, so the token was kept whole. Dropped (an invisible character, counted as stripped) or decoded
    (a mark between ASCII characters) for matching."""
    for token in (HF, GHP):
        line = '{"event": "login", "t": "' + token[:8] + split + token[8:] + '"}'
        out, n, _ = _shown(line)
        assert out == '{"event": "login", "t": "' + r.MASK + '"}' and n == 1, (split, out)
        assert r.may_hide(line)  # grep_log judges such a line as shown (no oracle through a match count)


def test_escapes_of_controls_and_of_ordinary_characters_are_kept() -> None:
    """Controls: a colour code's escape in a JSON log, escaped CJK text, an accented letter and a lone surrogate keep
    their escapes; a mark's escape not between ASCII characters is not decoded."""
    for text in ('{"msg": "\\u001b[31mloss nan\\u001b[0m"}', '{"x": "\\u4e2d\\u6587 step 3"}', '"caf\\u00e9"',
                 '"\\ud800 x"', '"e\\u0301"', 'C:\\users\\bob\\train.log', "a &#169; 2024 &amp; b &#12354;"):
        assert _shown(text) == (text, 0, 0), text


# ---------------------------------------------------------------- A04: an argv list pretty-printed one element a line

_META = {"os": "Linux", "python": "3.11", "program": "train.py", "git": {"commit": "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"},
         "args": ["--lr", "0.1", "--hf_token", "Zq8vR2mKx9PrettyArgsSecret", "--output_dir", "/data/runs/exp1",
                  "--password", "Pw0rdPrettyArgs77", "--hf_token_file", "/data/tok.txt", "--use_auth_token", "--max_tokens", "512"]}
_SECRETS = ("Zq8vR2mKx9PrettyArgsSecret", "Pw0rdPrettyArgs77")
_KEPT = ('"--lr"', '"0.1"', '"/data/runs/exp1"', '"/data/tok.txt"', '"--use_auth_token"', '"--max_tokens"', '"512"',
         "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b", '"--hf_token"', '"--password"', '"--hf_token_file"')


def test_a_pretty_printed_argv_lists_secret_flag_masks_the_next_element_in_a_whole_text() -> None:
    """W&B's wandb-metadata.json as W&B writes it (indent=4): `"--hf_token",` on one line, its value on the next. Promise 3
    says argv lists are caught; no rule took the value across the line break. Controls: the other arguments, a `_file`
    flag's path, a flag followed by another flag, a git SHA."""
    text = json.dumps(_META, indent=4)
    out, n, _ = _shown(text)
    assert n == 2 and not any(s in out for s in _SECRETS), out
    assert all(k in out for k in _KEPT), out


def test_a_pretty_printed_argv_lists_secret_value_is_masked_in_every_line_view() -> None:
    """Each line of a tail, a window or a grep block is judged with the two lines above it (logfile.judged,
    redact.redact_line_after): the value line alone held no keyword and came back as it was. grep_log's whole text (lines
    behind `N: `) got `[REDACTED]` over the next line's number and kept the value. And grep's match count is no oracle: a
    pattern of the secret's first characters matches no line as shown."""
    from ml_skills.collectors import logfile
    from ml_skills.mcp_tools import logs
    from ml_skills.safety.regex import LinePattern

    lines = json.dumps(_META, indent=4).splitlines()
    for start in range(len(lines)):  # every place a view can start: the flag line shown, or only the lines above it
        shown = logfile.judged(lines[max(0, start - 2):start], lines[start:])
        joined = "\n".join(shown)
        assert not any(s in joined for s in _SECRETS), (start, joined)
        assert all(k in joined for k in _KEPT if k in "\n".join(lines[start:])), (start, joined)
    numbered = "\n".join(f"{i}: {t}" for i, t in enumerate(lines, start=1))
    out, n, _ = _shown(numbered)
    assert n == 2 and not any(s in out for s in _SECRETS), out
    assert all(f"{i}: " in out for i in range(1, len(lines) + 1)), out  # no line's number masked
    at = next(i for i, t in enumerate(lines) if "Zq8v" in t)
    for guess in ("Zq8v", "Zq8vR2m", "PrettyArgs"):
        rx = logs._ShownLines(LinePattern(guess, False))
        assert not rx.search_after(lines[at - 2:at], lines[at]), guess
    lr = lines.index('        "0.1",')
    assert logs._ShownLines(LinePattern("0.1", False)).search_after(lines[lr - 2:lr], lines[lr])  # a control still matches


def test_argv_list_controls_are_kept() -> None:
    """Controls: a flag whose next element is a flag, a `--hf_token_file` with its path, the list on one line, a flag
    above a number of another flag's; and a line-numbered value is never masked as its number."""
    for prior, line in ((['"--use_auth_token",'], '    "--output_dir",'), (['"--hf_token_file",'], '    "/data/tok.txt",'),
                        (['"--max_tokens",'], '    "512",'), (['"--tokenizer",'], '    "gpt2",')):
        assert r.redact_line_after(prior, line) == line, line
    assert _shown("--hf_token\n9: loss 2.3")[0] == "--hf_token\n9: loss 2.3"
    out, n, _ = _shown("['--token',\n'Zq8vR2mKx9Secret']")  # unindented, as before
    assert "Zq8vR2mKx9Secret" not in out and n == 1


@pytest.mark.slow
def test_read_log_tail_and_grep_log_never_show_a_pretty_printed_argv_secret(tmp_path: Path) -> None:
    """The break as the tester drove it: a real MCP server over stdio, read_log_tail and grep_log on wandb-metadata.json
    (read_log_tail showed both values with `redactions: 0`, grep_log masked the `9:` prefix and kept the value)."""
    from tests.mcp.conftest import Server, text

    files = tmp_path / "wandb" / "offline-run-20250101_000000-abc123" / "files"
    files.mkdir(parents=True)
    meta = files / "wandb-metadata.json"
    meta.write_text(json.dumps(_META, indent=4))
    value_line = next(i for i, t in enumerate(json.dumps(_META, indent=4).splitlines(), start=1) if "Zq8v" in t)
    srv = Server(tmp_path, roots=[tmp_path])
    got: list[tuple[str, dict]] = []

    async def go() -> None:
        async with srv.client() as c:
            for tool, args in (("read_log_tail", {"path": str(meta)}), ("grep_log", {"path": str(meta), "pattern": "Pretty|--"}),
                               ("grep_log", {"path": str(meta), "pattern": "Zq8v", "context": 0}),
                               ("read_log_window", {"path": str(meta), "line": value_line, "before": 0, "after": 1})):
                res = await c.call_tool(tool, args)
                got.append((text(res) + json.dumps(res.structured_content), res.structured_content or {}))

    anyio.run(go)
    for answer, _ in got:
        _no_piece(_SECRETS[0], answer, 8)
        _no_piece(_SECRETS[1], answer, 8)
    tail, grep, guess, window = (d for _, d in got)
    assert '"--lr"' in tail["text"] and "/data/runs/exp1" in tail["text"]
    assert grep["total_matches"] > 0 and all(f"{i}: " in grep["text"] for i in grep["match_lines"])
    assert guess["total_matches"] == 0, guess  # no count spells the value out
    assert window["text"].count(r.MASK) == 1 and '"--output_dir"' in window["text"], window  # its flag's line not shown
    # each answer counts the masks it shows, made while its lines were judged with the lines above them in the worker
    # thread (they said `redactions: 0`)
    assert tail["redactions"] == tail["text"].count(r.MASK) >= 2, tail
    assert window["redactions"] == 1 and grep["redactions"] == grep["text"].count(r.MASK), (window, grep)


# ---------------------------------------------------------------- A11: a dashed secret name and its value in a tuple


@pytest.mark.parametrize("line", [
    "DEBUG grpc call metadata=(('x-api-key', 'Zq8vGrpcKey00001'),)",
    "DEBUG httpx request headers=Headers([('host', 'gitlab.example.com'), ('private-token', 'Zq8vGitlabTok0002')])",
    "DEBUG db connect args [('db-password', 'Zq8vDbPass000003')]",
    "[('X-Auth-Token', 'Zq8vAuthTok00004')]",
    '{"headers": [["x-api-key","Zq8vWbHeader0002"]]}',
])
def test_a_dashed_secret_name_and_its_value_as_two_strings_of_a_tuple_are_masked(line: str) -> None:
    """An HTTP or gRPC header as a pair of strings (a tuple, a JSON list): the tuple rule took names of `[a-z0-9_.]` only,
    so `x-api-key`, `private-token`, `db-password` kept their values."""
    out, n, _ = _shown(line)
    assert "Zq8v" not in out and n == 1, out


def test_dashed_names_that_name_no_secret_keep_their_values() -> None:
    for line in ("metadata=(('x-request-id', 'abcdef123456'),)", "[('content-type', 'application/json'), ('host', 'api.x.com')]",
                 "[('x-tokens-used', '12345'), ('secret-name', 'my-db-creds')]", '[["max-new-tokens", "1024"]]'):
        assert _shown(line) == (line, 0, 0), line


# ---------------------------------------------------------------- A12, A16: AWS SSM's parameter, and a W&B config holding it

_SSM_PRETTY = """+ aws ssm get-parameter --name /prod/db/password --with-decryption
{
    "Parameter": {
        "Name": "/prod/db/password",
        "Type": "SecureString",
        "Value": "Zq8vSsmValue0004",
        "Version": 3,
        "LastModifiedDate": "2025-01-01T00:00:00.000000+00:00",
        "ARN": "arn:aws:ssm:us-east-1:123456789012:parameter/prod/db/password",
        "DataType": "text"
    }
}"""


@pytest.mark.parametrize("text", [
    '{"Parameter": {"Name": "/prod/hf/token", "Type": "SecureString", "Value": "Zq8vSsmValue0005", "Version": 1}}',
    '{"Name":"/prod/db/password","Value":"Zq8vSsmValue0006"}',
    "{'Name': '/prod/api_key', 'Type': 'SecureString', 'Value': 'Zq8vSsmValue0007'}",
    _SSM_PRETTY,
])
def test_an_ssm_parameter_named_for_a_secret_is_masked(text: str) -> None:
    """AWS SSM's get-parameter output printed in a log: a Name that is a path ending in a secret keyword, with other
    fields (Type) between Name and Value. named-value took a bare name right before its value only."""
    out, n, _ = _shown(text)
    assert "Zq8v" not in out and n == 1, out
    assert "/prod/" in out and ("SecureString" in out) == ("SecureString" in text)


def test_an_ssm_parameter_is_masked_line_by_line_and_its_controls_kept() -> None:
    from ml_skills.collectors import logfile

    lines = _SSM_PRETTY.splitlines()
    for start in range(len(lines)):
        joined = "\n".join(logfile.judged(lines[max(0, start - 2):start], lines[start:]))
        assert "Zq8v" not in joined, (start, joined)
    for text in ('{"Parameter": {"Name": "/prod/db/host", "Type": "String", "Value": "db.internal.example", "Version": 2}}',
                 '{"Name": "/prod/db/password/rotation-days", "Type": "String", "Value": "30days"}',
                 '{"name": "HF_TOKEN_PATH", "mountPath": "/var/run/hf", "value": "/secrets/hf-token"}'):
        assert _shown(text) == (text, 0, 0), text
    host = _SSM_PRETTY.replace("/prod/db/password", "/prod/db/host").replace("Zq8vSsmValue0004", "db.internal.example")
    assert _shown(host)[0] == host


def test_a_wandb_config_holding_a_header_pair_or_an_ssm_parameter_is_masked() -> None:
    """A16: the same shapes in a W&B run's config, as get_wandb_run shows each entry (collectors/tracker._fmt, judged with
    the entry's name): `{"headers": [["x-api-key", X]]}` under `client`, `{"Name": "/prod/db/password", "Value": X}` under
    `db` came back in clear. Controls: an entry under an ordinary name and an SSM host parameter."""
    from ml_skills.collectors.tracker import _fmt

    assert "Zq8v" not in _fmt({"headers": [["x-api-key", "Zq8vWbHeader0002"]]}, "client")
    assert "Zq8v" not in _fmt({"Name": "/prod/db/password", "Value": "Zq8vWbSsm00003"}, "db")
    assert _fmt({"headers": [["x-request-id", "abc123"]]}, "client") == '{"headers": [["x-request-id", "abc123"]]}'
    assert _fmt({"Name": "/prod/db/host", "Value": "db.example.com"}, "db") == '{"Name": "/prod/db/host", "Value": "db.example.com"}'
