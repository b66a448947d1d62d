"""The redactor on fake secrets made at run time: every kind caught, look-alikes kept, fast on hostile lines."""

from __future__ import annotations

import math
import random
import string
import time

import pytest
from ml_skills.safety.redact import MASK, redact, redact_counted, redaction_count, reset_redaction_count

from tests.security import fakes
from tests.security.fakes import Planted
from tests.security.figures import record


@pytest.mark.parametrize("attempt", range(5))
def test_every_secret_kind_is_caught_line_by_line_and_shas_and_uuids_survive(attempt: int) -> None:
    p = Planted()
    out = "\n".join(redact(line) for line in p.log_lines())
    assert p.leaks(out) == []
    assert p.git_sha in out and p.uuid in out
    assert "alice:" + MASK + "@mlflow.example.com:5000" in out  # user and host kept
    assert "--hf-api-key " + MASK in out and "demo-project" in out
    record("secret instances planted", "redactor, line by line, fresh fakes of every kind", len(p.all_secrets()))
    record("look-alikes kept", "git SHA and UUID next to the secrets", 2)


def test_the_count_says_how_many_were_replaced() -> None:
    v = Planted().values
    text = f"a {v['github']} b {v['hf']} c --password {v['cli-password']}"
    new, n = redact_counted(text)
    assert n == 3 and new.count(MASK) == 3
    reset_redaction_count()
    redact(text)
    redact("nothing secret here")
    assert redaction_count() == 3


@pytest.mark.parametrize("text", [
    "step 100 loss 2.31 commit 3f2a9c1d4e5b6a7980c1d2e3f4a5b6c7d8e9f0a1",  # a bare 40-hex git SHA
    "run 5f9be171-f022-4232-8c29-61b5289e2b62 resumed",
    "ModuleNotFoundError: No module named 'tokenizers'",
    "--max_tokens 512 --token_budget=4",  # flags about tokens, with values too short to be secrets? kept readable
    "sha256:" + "a" * 64,
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "checkpoint-500/pytorch_model.bin",
])
def test_ordinary_log_text_is_left_alone(text: str) -> None:
    new, n = redact_counted(text)
    if "--max_tokens" in text:
        assert "--max_tokens 512" in new  # 'tokens' is not 'token': the value stays
    else:
        assert (new, n) == (text, 0)


@pytest.mark.parametrize("line", [
    "['python', 'train.py', '--api-key', '{s}']",  # argv as Python prints a list
    '["torchrun", "--wandb-api-key", "{s}"]',  # argv as JSON (psutil cmdline, tracker params)
    "WANDB_API_KEY={s}",
    "wandb login {s}",
    '{{"api_key": "{s}"}}',
])
def test_forty_hex_and_flag_values_next_to_their_keyword_are_caught(line: str) -> None:
    s = fakes.hex40()
    assert s not in redact(line.format(s=s))


def test_escaped_private_key_inside_one_json_line_is_caught() -> None:
    sa, parts = fakes.gcp_service_account()
    one_line = sa.replace("\n", " ")  # a config dumped on one log line
    out = redact(one_line)
    assert not any(x in out for x in parts)
    assert "trainer@demo-project.iam.gserviceaccount.com" in out


def test_redaction_is_idempotent_on_planted_text() -> None:
    text = "\n".join(Planted().log_lines())
    once = redact(text)
    assert redact(once) == once
    lines = [redact(x) for x in Planted().log_lines()]
    assert [redact(x) for x in lines] == lines


def _timed(text: str, tries: int = 1) -> float:
    """CPU seconds of this process to redact `text`, the least of `tries`: a neighbour's load on a shared machine
    stretches wall time, not the CPU this process spends (a 1 MB line's backtracking would cost 100x, not 5x)."""
    best = math.inf
    for _ in range(tries):
        t0 = time.process_time()
        redact_counted(text)
        best = min(best, time.process_time() - t0)
    return best


HOSTILE = {  # prefixes of every pattern, repeated to fill a 1 MB line
    "dashes": "-", "flag": " --token", "begin-key": "-----BEGIN RSA PRIVATE KEY-----", "jwt-head": "eyJaaaaaaaaa.",
    "url": "a://b:", "bearer": "Authorization: Bearer ", "json-key": '"private_key": "', "env": " API_KEY=",
    "base64": "aA1+", "hex": "0123456789abcdef", "akia": "AKIA", "underscore-key": "A_",
    "mysql": "mysql ", "curl": "curl ", "cookie": "Set-Cookie: a", "kaggle": '"username":"x","key":"', "mailgun": "key-", "aws-pair": "AKIAAAAAAAAAAAAAAAAA,",  # twelfth round
    "url-host": "a://b:c@", "hex-dot": "0123456789abcdef0123456789abcdef.", "stripe-glued": "xsk_live_a", "subscript": "x[\"api_key\"] = ", "redis": "redis-cli ",  # thirteenth round
    # fifteenth round (on one line with the thirteenth's comment until the sixteenth round, so never run)
    "xml-attribute": '<password x="</', "xml-name-attribute": '<x key="api_key" </', "xml-cdata": "<password><![CDATA[</",
    "url-no-host": "a://b:c@ ",
    "plist": "<key>api_key</key><string>", "xml-entity": "&lt;password&gt;a", "xml-unclosed": "<password>aaaa ",  # sixteenth round
    "look-alike": "\u1d18\u1d00\ua731\ua731\u1d21\u1d0f\u0280\u1d05\ufe55",
    "quoted": "password='a", "quoted-argv": "'--token', 'a", "quoted-json": '"password": "a\\',  # sixteenth round
    "html-reference": "password&#61;&#x67;&", "html-digits": "&#000000000",
    "pass-pwd": " DB_PASS=", "pass-prefix": "A_" * 20 + "PASS=",
    "inner-quote": " secret='a'b", "triple-quote": ' password="""a', "many-tabs": " api_key\t\t\t\t\t",  # seventeenth round
    "spaced-operator": " password    =    ", "leader": " password\u2024\u2024", "prefixed-quote": " token=rb'a'",
    "escaped-quote": '{\\"hf_token\\": \\"a', "escaped-open": " token=\\'a", "go-assign": " token ::= ",  # eighteenth round
    "yaml-tag": " api_key: !!str ", "yaml-anchor": " api_key: &a", "tuple": "('api_key', 'a", "tuple-open": "'token', '",
    "xml-value": '<password x value="a', "xml-value-far": "<password " + "x" * 190, "setenv": " setenv HF_TOKEN ",
    "set-flag": " set -gx api_key ", "env-step": "ENV HF_TOKEN a",
    "openssl": "-passin pass:", "keytool": " -storepass ",
    "wandb-login": " wandb login --host=x", "wandb-login-many": "wandb login --a --b --c --d --e ",  # twentieth round
    "azure-key": "fs.azure.account.key.a", "azure-key-long": "fs.azure.account.key." + "a." * 130 + "=",
    "sigils": "+~#$@!", "hydra-plus": " ++api_key", "key-suffix": " api_key_1", "key-suffix-word": "secret_key_base_",  # twenty-first
    "wandb-local": "wandb login local-", "docker-login": "docker login -u a ",
    "auth-bare": "Authorization: a1", "auth-bare-quote": "'authorization': 'a1b2c3d4e5f6a7b8", "az-login": "az login -u a ",  # twenty-second
    "setx": " setx HF_TOKEN ", "r-assign": " password <- ", "hex-user-password": "a://0123456789abcdef0123456789abcdef:",
    "continued-flag": " --hub_token \\", "block-scalar": " password: |-", "env-space": "HF_TOKEN ",  # fifty-third round
    "box-table": "\u2502 api_key \u2502 ", "typed-default": " password: Optional[str", "bold-name": "**api_key**",  # fifty-fifth
    "list-value": " api_key: ['", "ansi-c-quote": " HF_TOKEN=$'",  # fifty-fourth
}


MB = 1_000_000


@pytest.fixture(scope="module")
def reference() -> float:
    """What 1 MB of random letters and spaces costs to redact on this machine, now."""
    rng = random.Random(7)
    return _timed("".join(rng.choice(string.ascii_letters + " ") for _ in range(MB)), tries=3)


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_one_megabyte_line_costs_no_more_than_ordinary_text(name: str, reference: float) -> None:
    """No catastrophic backtracking: a 1 MB line built from a pattern's prefix redacts within a few
    times the cost of 1 MB of random letters (measured against that reference, not a wall-clock figure)."""
    n = MB
    unit = HOSTILE[name]
    hostile = (unit * (n // len(unit) + 1))[:n]
    took = _timed(hostile)
    if took >= 5 * reference + 0.05:
        # measured again before judging, beside a fresh reference: one run can land in a neighbour's burst, and the module's
        # reference was timed once, maybe on a quieter machine (the clean-clone run of 0cf2d2d4 failed quoted-argv at 5.3x
        # an hour-old reference; alone, beside a fresh one, it is under 5x)
        rng = random.Random(7)
        reference = _timed("".join(rng.choice(string.ascii_letters + " ") for _ in range(MB)), tries=2)
        took = min(took, _timed(hostile, tries=2))
    assert took < 5 * reference + 0.05
    record("hostile inputs", "1 MB lines built from a pattern's prefix (backtracking)", 1)


def test_a_pem_body_line_with_no_digit_is_still_a_key_line() -> None:
    """One random 64-character base64 line in about 50,000 holds no digit (the clean-clone CI run of 125d85c drew one:
    'UVDjCzYd...+uGVVtzs' was kept in clear); a full body line, or one with '+' or '/', is a key line whatever its
    digits. A CamelCase identifier of letters only stays."""
    rng = random.Random(7)
    letters = string.ascii_letters
    full = "".join(rng.choice(letters) for _ in range(40)) + "+" + "".join(rng.choice(letters) for _ in range(23))
    assert redact(full) == MASK
    assert redact("".join(rng.choice(letters) for _ in range(64))) == MASK
    assert redact("[rank0]: " + full) == "[rank0]: " + MASK
    for kept in ("ThisIsAnOrdinaryCamelCaseIdentifierWithoutDigits", "TrainingLoopFinishedSuccessfully"):
        assert redact(kept) == kept
