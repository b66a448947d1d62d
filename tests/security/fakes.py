"""Fake secrets in the real formats, made fresh for each test run so no real secret is ever in the repo.

Each generator returns the exact string that must never appear in any output. `plant()` gives
one of every kind, keyed by kind, plus the look-alikes that must survive (git SHAs, UUIDs).
"""

from __future__ import annotations

import base64
import json
import secrets
import string
import uuid

ALNUM = string.ascii_letters + string.digits
UPPER_NUM = string.ascii_uppercase + string.digits


def rand(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def aws_key_id() -> str:
    return "AKIA" + rand(UPPER_NUM, 16)


def aws_secret() -> str:
    return rand(ALNUM + "/+", 40)


def github() -> str:
    return "ghp_" + rand(ALNUM, 36)


def github_pat() -> str:
    return "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59)


def hf() -> str:
    return "hf_" + rand(ALNUM, 34)


def openai() -> str:
    return "sk-proj-" + rand(ALNUM + "-_", 64)


def wandb_v1() -> str:
    return "wandb_v1_" + rand(ALNUM, 77)


def hex40() -> str:
    return secrets.token_hex(20)


def jwt() -> str:
    head = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64url(json.dumps({"sub": rand(ALNUM, 12), "iat": 1700000000}).encode())
    return f"{head}.{body}.{b64url(secrets.token_bytes(32))}"


def password() -> str:
    return rand(ALNUM, 6) + "!" + rand(ALNUM, 8)


def pem_body() -> list[str]:
    """The base64 lines of a fake PKCS#8 key: 64 columns, as openssl writes them."""
    raw = base64.b64encode(b"\x30\x82\x04\xbd" + secrets.token_bytes(900)).decode()
    return [raw[i : i + 64] for i in range(0, len(raw), 64)]


def pem() -> str:
    return "-----BEGIN PRIVATE KEY-----\n" + "\n".join(pem_body()) + "\n-----END PRIVATE KEY-----\n"


def gcp_service_account() -> tuple[str, list[str]]:
    """A service-account key file's JSON (private key with escaped \\n) and the secrets inside it."""
    key = pem()
    kid = hex40()
    doc = {
        "type": "service_account", "project_id": "demo-project", "private_key_id": kid, "private_key": key,
        "client_email": "trainer@demo-project.iam.gserviceaccount.com", "client_id": "1" + rand(string.digits, 20),
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    return json.dumps(doc, indent=2), [kid, *pem_body_of(key)]


def pem_body_of(key: str) -> list[str]:
    return [x for x in key.splitlines() if x and not x.startswith("-----")]


class Planted:
    """One of every secret kind (the values that must never appear) and the look-alikes that must."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {
            "aws-key-id": aws_key_id(), "aws-secret": aws_secret(), "github": github(), "github-pat": github_pat(),
            "hf": hf(), "openai": openai(), "wandb-v1": wandb_v1(), "wandb-hex": hex40(), "jwt": jwt(),
            "bearer": rand(ALNUM, 40), "basic": base64.b64encode(f"alice:{password()}".encode()).decode(),
            "url-password": password(), "cli-api-key": rand(ALNUM, 32), "cli-token": rand(ALNUM, 24),
            "cli-password": password(),
        }
        self.sa_json, self.sa_secrets = gcp_service_account()
        self.pem = pem()
        self.git_sha = hex40()
        self.uuid = str(uuid.uuid4())

    def all_secrets(self) -> list[str]:
        return [*self.values.values(), *self.sa_secrets, *pem_body_of(self.pem)]

    def leaks(self, text: str) -> list[str]:
        """Every planted secret (or a 16-character piece of one) found in text."""
        found = []
        for s in self.all_secrets():
            if s in text or any(s[i : i + 16] in text for i in range(0, max(1, len(s) - 15), 8)):
                found.append(s)
        return found

    def log_lines(self) -> list[str]:
        """How secrets really reach training logs: printed args, configs, headers, URLs, command lines."""
        v = self.values
        return [
            f"Namespace(lr=0.1, hf_token='{v['hf']}', wandb_api_key='{v['wandb-hex']}', seed=0)",
            f"git commit {self.git_sha} run id {self.uuid}",
            f"aws_access_key_id = {v['aws-key-id']}",
            f"aws_secret_access_key = {v['aws-secret']}",
            f"export GITHUB_TOKEN={v['github']}",
            f"pip install git+https://{v['github-pat']}@github.com/org/repo.git",
            f"OPENAI_API_KEY: {v['openai']}",
            f"wandb: Appending key for api.wandb.ai to your netrc file: {v['wandb-v1']}",
            f"send: b'GET /v1/models HTTP/1.1\\r\\nAuthorization: Bearer {v['bearer']}\\r\\n'",
            f"proxy: Authorization: Basic {v['basic']}",
            f"token={v['jwt']}",
            f"MLFLOW_TRACKING_URI=https://alice:{v['url-password']}@mlflow.example.com:5000",
            f"launch: torchrun train.py --hf-api-key {v['cli-api-key']} --auth-token={v['cli-token']} --password '{v['cli-password']}'",
            *self.sa_json.splitlines(),
            *self.pem.splitlines(),
        ]
