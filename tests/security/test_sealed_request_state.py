"""The MCP SDK's sealed request state leaves the server as the SDK minted it.

An approval on the 2026-07-28 protocol is a round trip: the server answers `input_required` with a sealed `requestState`
(AES-GCM ciphertext, base64url) and the client sends it back with the person's answer. The last redaction pass on every
result once rewrote it when its random text happened to hold a secret's shape ('hf_' and 34 letters or digits, a Hugging
Face token's): the client's answer then came back "Invalid or expired requestState" (a clean-clone CI run of
test_fourteenth_round, 2026-12-05). Sealed tokens are made here with the SDK's own codec until one holds such a shape."""

from __future__ import annotations

import json
import secrets

from mcp.server.request_state import AESGCMRequestStateCodec
from mcp.types import InputRequiredResult
from ml_skills.safety.redact import redact, redact_value


def _token_redaction_would_change() -> str:
    codec = AESGCMRequestStateCodec([secrets.token_bytes(32)])
    for _ in range(200_000):
        tok = codec.seal(json.dumps({"v": 1, "s": secrets.token_hex(40)}).encode())
        if redact(tok) != tok:
            return tok
    raise AssertionError("no sealed token in 200,000 held a secret's shape")


def test_a_sealed_request_state_is_never_rewritten_while_secrets_beside_it_are():
    tok = _token_redaction_would_change()
    hf = "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    result = InputRequiredResult(input_requests={}, request_state=tok, meta={"note": f"token {hf}"})
    out = redact_value(result)
    assert out.request_state == tok  # the round trip's token, byte for byte
    assert hf not in json.dumps(out.model_dump(mode="json"))  # the rest of the result is still redacted
    wire = redact_value({"resultType": "input_required", "requestState": tok, "detail": hf})
    assert wire["requestState"] == tok and hf not in wire["detail"]
    # only the input_required result's own field: a key of that name inside any other value is redacted (twenty-sixth round)
    nested = redact_value({"fields": {"requestState": tok, "request_state": hf}, "wire": wire})
    assert hf not in json.dumps(nested) and tok not in json.dumps(nested)
