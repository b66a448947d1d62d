"""Remove secrets from any text before it leaves the process, after removing what a reader cannot see.

Patterns are precompiled, with bounded quantifiers only, so a 1 MB line cannot make them
backtrack. Redaction is idempotent: the replacement never matches a pattern again. A result model
passes through `redact_value` when it is built, and the count of replacements is kept per context
(`redaction_count`) so results can report it.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import re
import threading
import unicodedata
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from ml_skills.lazyre import lazy
from ml_skills.modelkit import BaseModel
from ml_skills.safety.invisible import hidden_characters, strip_invisible, stripped_and_masked
from ml_skills.safety.unescape import is_mark, may_hide_escaped, unescaped_counted

MASK = "[REDACTED]"

_count: ContextVar[int] = ContextVar("redactions", default=0)
_stripped: ContextVar[int] = ContextVar("stripped", default=0)

# Each rule's secret is the named group `s`; only that span is replaced, so keys, flags, users
# and hosts around it stay readable.
# A flag or key name may only start after a separator (start, space, quote, '=', ',', '[', '(', a URL's
# '?' or '&', ...) or right after a URL-encoded byte (`%3F`), so a run of dashes or letters cannot make
# every position a candidate (no quadratic scans).
# Twenty-first round: also after a Hydra override's `+`, `++` or `~` (`python train.py +wandb.api_key=X`, and
# `.hydra/overrides.yaml`'s `- +db.password=X`), a URL fragment's `#` (OAuth's `#access_token=X`) and a variable's
# sigil (`$password = "X"` in PowerShell or Perl, `@api_key` in SQL, `!token`): each kept its value in clear.
# Seventy-seventh round: also after a backtick, a backslash, `^` or `%` (markdown's inline code `` `DB_PASSWORD=X` ``): each
# kept X. (A printed escape before a name, `'host: h\npassword: X'`, is read as what it stands for: _masked_as_unescaped.)
_START = r"(?:(?<![^\s'\"=,\[(:;{/?&|<>*+~#$@!`\\^%])|(?<=%[0-9A-Fa-f]{2})|(?<=%25[0-9A-Fa-f]{2}))"
# A bare `sk-` key (a short, common prefix) must not follow a letter or digit (`task-...`, `disk-...`),
# except through a URL-encoded byte (`%3Dsk-...`, `%253Dsk-...`). Tokens with a long or distinctive prefix
# (ghp_, hf_, sk-proj-, AKIA, eyJ...) are taken after anything: `GH_TOKEN_ghp_...`, `x%3Dhf_...`.
_GLUED = r"(?:(?<![A-Za-z0-9])|(?<=%[0-9A-Fa-f]{2})|(?<=%25[0-9A-Fa-f]{2}))"
# Names whose value is a secret: the keyword families. `token`, `secret` and `password` must end the word
# (`tokens`, `tokenizer`, `secretName` are not secrets); a `key` needs a qualifier (`api_key`,
# `secret-key`, `wandb_key`, `aws_secret_access_key`), since `key` alone names ordinary things.
_KEYWORD = (
    r"(?:(?:api|access|private|secret|wandb|auth|client|session|signing|encryption|master|account|service|license|ssh|hmac|kaggle|storage|subscription|"
    r"hf|openai|anthropic|github|gh|mlflow|comet|neptune)[_.\-]?(?:access[_.\-]?)?key(?![a-z])"
    r"|apikey|secret(?![a-z])|token(?![a-z])|passw(?:or)?d(?![a-z])|passphrase(?![a-z]))"
    # Twenty-first round: a name that goes on after its keyword with a number or a word naming which one (`API_KEY_1`,
    # `password2`, `SECRET_KEY_BASE`, `DB_PASSWORD_PROD`, `HF_TOKEN_READ`, `AUTH_TOKEN_V2`): listed as kept since the
    # thirteenth round (`SECRET_KEY_BASE=X`); any other word after the keyword (`token_count`, `secret_name`) still ends it.
    r"(?:[_\-]?[0-9]{1,3}|[_\-](?:base|prod|production|dev|staging|stage|test|primary|secondary|backup|old|new|main|"
    r"ro|rw|read|write|admin|root|value|v[0-9]{1,2}))?(?![a-z0-9])"
)
_KEY_NEEDLES = ("key", "token", "passw", "secret", "passphrase")
# What separates a name from its value: `=`, `:` (YAML, headers, JSON), `=>` / `->` (a printed map), a table's cell
# border (`| api_key | X |`, a markdown table of a run's arguments) or tabs (a TSV dump), and the URL-encoded forms of
# `=` and `:`, once or twice (`%3D`, `%253D`). A subscript's closing `"]` may come before the operator:
# `os.environ["WANDB_API_KEY"] = "X"`, `config['hub_token'] = X` (kept in clear before the thirteenth round).
_PCT = r"%(?:25)?"
# Seventeenth round (each listed as kept by the sixteenth): any run of spaces or tabs around the operator (`password =    X`
# aligned, a TSV's empty cells `api_key<4 tabs>X`; possessive, so a long run costs one pass), a one- or two-dot leader
# (`password\u2024X`: never a member access, unlike `.`), and a triple-quoted value (`password = """X"""`).
# Eighteenth round (each listed as kept by the seventeenth or before): quotes escaped once or more around the name and the value
# (`{\"hf_token\": \"X\"}`, JSON in a JSON string, as a container's log driver or a logging service stores a JSON line;
# `hf_token=\'X\'`), Go's and BNF's `:=` and `::=`, and a YAML tag or anchor before the value (`api_key: !!str X`, `&a X`).
_ASSIGN = (r"(?:(?:\\{0,3}+['\"]\]?)?(?:[*_]{1,3}+)?(?:[ \t]{0,3}+:[ \t]{0,3}+['\"]?[A-Za-z_][A-Za-z0-9_.\[\](), |'\"=]{0,80}?(?=[ \t]{0,3}+=(?!=)))?"
           r"(?:\s{0,3}+[ \t]{0,40}+(?:::?=|[:=]|=>|->|<-)\s{0,3}+[ \t]{0,40}+"
           r"(?:(?:!{1,2}[a-z]{1,20}+|&[A-Za-z0-9_\-]{1,40}+)[ \t]{1,3}+)?+|[ ]{0,3}[|\u2502\u2503\u2551][ ]{0,3}|[ ]{0,40}+\t[ \t]{0,40}+"
           r"|[ ]{0,3}[\u2024\u2025\u00b7\u2027\u2219\u22c5\u2e31\u30fb]{1,40}+[ ]{0,3})(?:(?:[\[(][ \t]{0,3}+){1,3}+(?=[rRbBuUfF]{0,2}['\"]))?(?:[rRbBuUfF]{1,2}(?=['\"]))?(?:\\{1,3}+['\"]|'{3}|\"{3}|\$?['\"])?|(?:" + _PCT + r"2[27])?" + _PCT + r"3[DdAa](?:" + _PCT
           + r"20|\+)?(?:" + _PCT + r"2[27])?)")

# A value in quotes is taken whole, to its closing quote (sixteenth round): a value ended at a space, a quote, `,`, `}`, `&`,
# `]` or `)`, so `"password": "Zq8v)R2m..."`, `DB_PASSWORD="two words"`, `api_key: 'a,b'`, an escaped quote in JSON
# (`"Zq8v\"R2m"`), `--password 'two words'` and an argv list's `'--token', 'a b'` showed what followed. Tried only where
# the name's operator ends in a quote (a lookbehind); the closing quote must end the word (a space, the line's end or a
# closing mark follows), so `input("password: ") or input("token: ")` is code, not a value.
# Seventeenth round: the same quote inside the value, between two characters of it (`secret='a'b'`: one glued to a letter or
# digit on its right, after anything but a space, an opening mark or `=:,+`, so `"token: " + t + "x"` is still code), and a
# tripled closing quote (`"""X"""`) are taken with it; before, the value ended at the inner quote and the rest was kept.
# Eighteenth round: a value between escaped quotes (`\"X\"`, `\'X\'`) is taken to the next escaped quote, its backslash kept
# (and only so: the plain branch, which scans up to 1,000 characters for its closing quote, is not tried after an escaped one).
def _quoted(least: int) -> str:
    return "".join(rf"(?<=\\{q})[^{q}\\\n]{{{least},1000}}+(?=\\{q})|"
                   rf"(?<=(?<!\\){q})(?:\\.|[^{q}\\\n]|(?<=[^\s(\[{{=:,+]){q}(?=[A-Za-z0-9])){{{least},1000}}?(?={q}{{1,3}}(?:[\s,;}})\]&]|$))|"
                   for q in ("'", '"'))


# A URL's host (and port) after user:password@, up to where the authority ends (RFC 3986: a `/`, `?`, `#`, or the
# word's end): what tells the '@' that ends a password from one inside it (`https://u:p@ss@host/`). Any character but
# those and '@' may be in it, or after it in the same word: before the thirteenth round the host had to be ASCII letters,
# digits and `.-[]:` and end at a listed character, so `https://u:PW@example.com</a>` (HTML), `**https://u:PW@host**`
# (markdown), `...@host!`, `...@host&x=1`, `...@exämple.com/` and `...@ex_ample.com/` kept the password in clear.
_HOST = r"(?=[^\s@/?#]{0,255}(?:[/?#\s]|$))"  # looked at, not taken: a second URL after a `,` or `;` in the same word is matched too

# The prefix a launcher puts on each line a rank prints: torchrun's `[rank0]: ` / `[default0]:`, mpirun --tag-output's
# `[1,0]<stdout>:`. A PEM key printed by a rank has it on every body line (eleventh round: kept line by line).
_RANK_PREFIX = r"(?:\[[\w,.:\-]{1,40}\](?:<std(?:out|err)>)?:?[ \t]{0,4})?"

# A W&B key of 40 hex digits, and the same behind the prefix of a self-hosted server's keys (`local-`, a VM's `vm-`): twenty-first
# round, `wandb login local-<40 hex>` (the key W&B Server hands out) was kept in clear.
_WANDB_KEY = r"(?:(?:local|vm)-)?[0-9a-f]{40}"

# The number grep_log (`9: `) and an excerpt (` 10 | `, `>15 | `) put before each line they show: never a value on the
# line below a flag.
_LINE_NUMBER = r"[ \t]{0,12}>?\d{1,12}[ \t]{0,4}[:|](?:[ \t]|$)"

# Each rule also names lowercase needles, one of which must be in the text for the rule to run: a cheap
# `in` test that skips most rules on ordinary log lines.
_RULES: list[tuple[str, tuple[str, ...], re.Pattern[str]]] = [
    ("pem-private-key", ("private key",), lazy(
        r"(?P<s>-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----(?:(?!-----END)[\s\S]){0,8000}(?:-----END [A-Z ]{0,40}PRIVATE KEY-----)?)")),
    ("gcp-private-key-json", ('"private_key"',), lazy(r'"private_key"\s{0,5}:\s{0,5}"(?P<s>[^"]{1,8000})"?')),
    # ... as JSON, and as Python prints the loaded dict ('private_key_id': 'X'), YAML or an assignment (eleventh round: kept)
    ("gcp-private-key-id", ("private_key_id", "client_secret"), lazy(
        r"(?i)(?<![A-Za-z0-9_])['\"]?(?:private_key_id|client_secret)['\"]?\s{0,5}[:=]\s{0,5}['\"]?(?P<s>[^'\"\s,}]{8,200})")),
    # A PEM body line on its own (a key printed line by line is redacted one line at a time): 24-76
    # base64 characters with upper, lower case and a digit, '+' or '/' (or exactly 64, a full body line: one in 50,000
    # random ones holds no digit, which the digit rule alone let through), so a bare git SHA (hex) is not one; a line
    # number prefix ('12: ', '  12 | ') as grep and the report print it, and a rank's prefix, are allowed.
    ("pem-body-line", (), lazy(
        r"(?m)^[\s'\">]{0,8}" + _RANK_PREFIX + r"(?:\d{1,12}\s{0,4}[:|]\s{0,4})?(?P<s>(?=[A-Za-z0-9+/]{0,76}[A-Z])(?=[A-Za-z0-9+/]{0,76}[a-z])"
        r"(?:(?=[A-Za-z0-9+/]{0,76}[0-9+/])[A-Za-z0-9+/]{24,76}|[A-Za-z0-9+/]{64})={0,2})[\s'\",\\n]{0,8}$")),
    # An AWS secret with no name beside it, but right after its access key id: the credentials CSV the console gives
    # (`user,,AKIA...,SECRET`), `aws configure list` and a printed tuple (twelfth round: the id was masked, the secret kept)
    ("aws-secret-after-id", ("akia", "asia"), lazy(
        r"(?:AKIA|ASIA)[A-Z0-9]{16}['\"]?[\s,;:|=()\[\]]{1,10}['\"]?(?P<s>(?=[A-Za-z0-9/+]{0,39}[a-z])(?=[A-Za-z0-9/+]{0,39}[A-Z])"
        r"[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])")),
    ("aws-access-key-id", ("akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"), lazy(
        r"(?P<s>(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16})(?![A-Z0-9])")),
    # (seventy-sixth round: also after a space, as `aws configure set aws_secret_access_key X` and its config echo write it;
    # the 40 characters of the secret's own shape keep prose such as `aws_secret_access_key is not set` out)
    ("aws-secret", ("secret",), lazy(
        r"(?i)(?:aws_secret_access_key|secret_access_key|aws_secret|secretaccesskey)['\"]?(?:\s{0,3}[:=]\s{0,3}|[ \t]{1,3})['\"]?(?P<s>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])")),
    ("github-token", ("gh", "github_pat_"), lazy(r"(?P<s>gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9])")),
    ("hf-token", ("hf_",), lazy(r"(?P<s>hf_[A-Za-z0-9]{30,255})(?![A-Za-z0-9])")),
    ("openai-key", ("sk-",), lazy(r"(?P<s>sk-(?:proj|ant|svcacct|admin)-[A-Za-z0-9_\-]{20,200}|sk-[A-Za-z0-9]{48}(?![A-Za-z0-9]))")),
    ("sk-key", ("sk-",), lazy(_GLUED + r"(?P<s>sk-[A-Za-z0-9_\-]{20,200})")),
    ("wandb-v1-key", ("wandb_v1_",), lazy(r"(?P<s>wandb_v1_[A-Za-z0-9_]{20,200})")),
    ("wandb-keyword-key", ("key", "login"), lazy(
        r"(?i)(?:wandb[_-]?api[_-]?key|wandb\s{1,3}login|api_key|\bkey)['\"]?\s{0,3}[:= ]\s{0,3}['\"]?(?P<s>" + _WANDB_KEY + r")\b")),
    # twentieth round: options between `wandb login` and the key (`--relogin KEY`, `--host URL KEY`), and Hadoop's Azure storage
    # key as a Spark or core-site setting (`fs.azure.account.key.ACCOUNT.blob.core.windows.net=KEY`), were kept in clear
    ("wandb-login-key", ("login",), lazy(
        r"(?i)\bwandb\s{1,3}login(?:\s{1,3}+--?[a-z][a-z-]{0,20}+(?:[= ]\s{0,3}+(?!" + _WANDB_KEY + r"\b)[^\s'\"]{1,200}+)?){1,4}"
        r"\s{1,3}['\"]?(?P<s>" + _WANDB_KEY + r")\b")),
    ("azure-account-key", ("fs.azure.account.key.",), lazy(
        r"(?i)fs\.azure\.account\.key\.[A-Za-z0-9.-]{1,253}+['\"]?\s{0,3}+[=:]\s{0,3}+['\"]?(?P<s>[A-Za-z0-9+/]{20,200}+={0,2})")),
    # bot, user, app-level (xapp-), configuration and refresh (xoxe.xoxp-, xoxe-) tokens
    ("slack-token", ("xox", "xapp-"), lazy(r"(?P<s>xox[abposre]-[A-Za-z0-9-]{10,200}|xoxe\.xox[bp]-[A-Za-z0-9-]{10,200}|xapp-\d-[A-Za-z0-9-]{10,200})")),
    # Stripe secret and restricted keys, live and test mode. A live key is taken after anything, as promise 3 says of
    # Stripe's keys (`STRIPE_KEYsk_live_...`, `1sk_live_...` were kept in clear before the thirteenth round); a test key
    # not after a letter or digit, but through a URL-encoded byte (`task_test_...` is a name).
    ("stripe-key", ("_live_", "_test_"), lazy(r"(?P<s>[sr]k_live_[A-Za-z0-9]{16,250}|" + _GLUED + r"[sr]k_test_[A-Za-z0-9]{16,250})(?![A-Za-z0-9])")),
    ("google-api-key", ("aiza",), lazy(r"(?P<s>AIza[0-9A-Za-z_\-]{35})")),
    # GitLab, npm and Docker access tokens, a Google OAuth client secret, access token and refresh token, a Databricks
    # token: distinctive prefixes, so taken after anything (a Databricks `dapi` only after a non-letter; tenth round)
    # PyPI upload tokens (a macaroon for pypi.org or test.pypi.org), Replicate, Grafana Cloud and Shopify tokens (eleventh round)
    # LangSmith, Groq, xAI, Perplexity, NVIDIA, HashiCorp Vault, Pinecone, Sentry, DigitalOcean, Together, Atlassian, GCS
    # HMAC access ids and Mailgun keys (twelfth round: each was kept in clear)
    ("vendor-token", ("glpat-", "npm_", "dckr_pat_", "gocspx-", "ya29.", "1//0", "dapi", "pypi-ag", "r8_", "glc_", "shp", "lsv2_",
                      "gsk_", "xai-", "pplx-", "nvapi-", "hvs.", "hvb.", "pcsk_", "sntrys_", "_v1_", "atatt3", "goog1", "key-"), lazy(
        r"(?P<s>lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}|" + _GLUED + r"(?:gsk_[A-Za-z0-9]{48,60}|xai-[A-Za-z0-9]{60,100}"
        r"|pplx-[A-Za-z0-9]{40,60}|nvapi-[A-Za-z0-9_\-]{60,70}|hv[sb]\.[A-Za-z0-9_\-]{90,200}|pcsk_[A-Za-z0-9]{4,10}_[A-Za-z0-9]{40,90}"
        r"|sntrys_[A-Za-z0-9+/=_\-]{50,400}|do[opr]_v1_[a-f0-9]{64}|tgp_v1_[A-Za-z0-9_\-]{40,60}|ATATT3[A-Za-z0-9_\-=]{150,300}"
        r"|GOOG1[A-Z0-9]{50,70}|key-[a-f0-9]{32})(?![A-Za-z0-9])"
        r"|glpat-[A-Za-z0-9_\-]{20,255}|npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])|dckr_pat_[A-Za-z0-9_\-]{20,255}"
        r"|pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_\-]{20,4000}|" + _GLUED + r"r8_[A-Za-z0-9]{37}(?![A-Za-z0-9])"
        r"|glc_[A-Za-z0-9+/]{32,4000}={0,2}|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}(?![A-Za-z0-9])"
        r"|GOCSPX-[A-Za-z0-9_\-]{20,255}|ya29\.[A-Za-z0-9_\-]{20,4000}|1//0[A-Za-z0-9_\-]{30,1000}"
        r"|" + _GLUED + r"dapi[0-9a-f]{32}(?:-\d)?(?![A-Za-z0-9]))")),
    # Zhipu (BigModel) API keys: an id of 32 hex digits, a dot, and a secret of 16 letters and digits (thirteenth round:
    # kept in clear; listed as a gap in the twelfth). No literal is common to them but the dot, so the rule starts at the
    # dot (a literal the regex engine skips to) and looks back for the id; the secret after the dot is masked.
    ("hex-dot-key", (".",), lazy(r"\.(?<=(?<![A-Za-z0-9])[0-9a-f]{32}\.)(?P<s>[A-Za-z0-9]{16})(?![A-Za-z0-9])")),
    # SendGrid API keys, Discord webhooks and Telegram bot tokens (twelfth round: kept in clear; `sg.` is a common substring,
    # `msg.`, so the rule starts with its literal and is cheap where it fails), and a Cookie / Set-Cookie header's value:
    # a session cookie is a login.
    ("sendgrid-key", ("sg.",), lazy(r"(?P<s>SG\.(?<![A-Za-z0-9_\-]SG\.)[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43})(?![A-Za-z0-9_\-])")),
    ("discord-webhook", ("discord",), lazy(
        r"(?i)discord(?:app)?\.com/api/(?:v\d{1,2}/)?webhooks/\d{15,25}/(?P<s>[A-Za-z0-9_\-]{30,120})")),
    ("telegram-bot-token", (":aa",), lazy(r"(?<![A-Za-z0-9_])(?:bot)?\d{6,12}:(?P<s>AA[A-Za-z0-9_\-]{30,40})(?![A-Za-z0-9_\-])")),
    ("cookie-header", ("cookie",), lazy(
        r"(?i)(?<![A-Za-z0-9_\-])(?:set-)?cookie['\"]?\s{0,3}[:=]\s{0,3}['\"]?(?P<s>[^\r\n'\"]{4,4000})")),
    # A Docker config's `"auth"` (base64 of user:password), kaggle.json's `"key"` after its `"username"`, and a password
    # given on a command line to sshpass, mysql (`-pPW`) or curl (`-u user:PW`) (twelfth round: kept in clear), and
    # redis-cli's `-a PW` (thirteenth round)
    ("docker-auth", ('"auth"',), lazy(r'"auth"\s{0,3}:\s{0,3}"(?P<s>[A-Za-z0-9+/]{8,4000}={0,2})"')),
    # (forty-sixth round: pretty-printed, the key's line below its username's with an indent, and as Python prints the dict)
    ("kaggle-key", ('"username"', "'username'"), lazy(
        r"""(["'])username\1\s{0,3}:\s{0,3}(["'])[^"'\n]{1,100}\2\s{0,3},\s{0,40}(["'])key\3\s{0,3}:\s{0,3}(["'])(?P<s>[0-9a-f]{32})\4""")),
    # ... and `docker login -p X` (twenty-first round: kept in clear; `--password X` was caught by the flag rule), and the Azure
    # CLI's `az login --service-principal -u APP -p X` (twenty-second round: a CI log's `set -x` prints it expanded), and
    # curl's glued `-uuser:X` (seventy-sixth round)
    ("cli-password", ("sshpass", "mysql", "curl", "redis-cli", "docker", "az login"), lazy(
        r"(?:\bsshpass\s{1,3}-p\s{0,3}|\b(?:docker|az)\s{1,3}login\b[^\n;&|]{0,200}?\s-p(?:\s{1,3}|=)|\bredis-cli\b[^\n]{0,200}?\s-a\s{1,3}|\bmysql(?:dump|admin)?\b[^\n]{0,200}?\s-p|\bcurl\b[^\n]{0,200}?\s(?:-u|--user)[\s=]{0,3}['\"]?"
        r"[^\s:'\"]{1,200}:)['\"]?(?P<s>[^\s'\"]{1,200})")),
    # Seventy-sixth round: the password flags of other tools a job's setup or `set -x` prints, kept in clear before: `zip` /
    # `unzip -P X`, `7z -pX`, `sqlcmd -P X`, `mongosh` / `mongodump -p X`, `lftp -u user,X`, `ldapsearch -w X` (the
    # seventy-fourth round's gap), `smbclient -U user%X`, `htpasswd -b[c] FILE USER X` / `-nb USER X`, Windows' `net use ...
    # /user:NAME X` and PowerShell's `ConvertTo-SecureString "X"`, and a SigV4 `Signature=` (64 hex digits).
    ("cli-password-more", ("zip", "7z", "sqlcmd", "mongo", "lftp", "ldap", "smbclient", "htpasswd", "net use", "securestring"), lazy(
        r"(?:\b(?:un)?zip\b[^\n]{0,200}?\s-P\s{1,3}|\b7z[ar]?\b[^\n]{0,200}?\s-p(?=\S)|\bsqlcmd\b[^\n]{0,200}?\s-P\s{1,3}"
        r"|\bmongo(?:sh|dump|restore|import|export|stat|top)?\b[^\n]{0,200}?\s(?:-p|--password)(?:\s{1,3}|=)"
        r"|\blftp\b[^\n]{0,200}?\s-u\s{1,3}['\"]?[^\s,'\"]{1,200},"
        r"|\bldap(?:search|add|modify|delete|passwd|whoami|compare|modrdn|exop)\b[^\n]{0,200}?\s-w\s{1,3}"
        r"|\bsmbclient\b[^\n]{0,200}?\s(?:-U|--user(?:name)?)[\s=]{0,3}['\"]?[^\s%'\"]{1,200}%"
        r"|\bhtpasswd\s{1,3}-(?=[A-Za-z]{0,5}b)(?![A-Za-z]{0,5}n)[A-Za-z]{1,6}\s{1,3}(?:-[A-Za-z]{1,5}\s{1,3}){0,3}\S{1,300}\s{1,3}\S{1,200}\s{1,3}"
        r"|\bhtpasswd\s{1,3}-(?=[A-Za-z]{0,5}b)(?=[A-Za-z]{0,5}n)[A-Za-z]{1,6}\s{1,3}(?:-[A-Za-z]{1,5}\s{1,3}){0,3}\S{1,200}\s{1,3}"
        r"|\bnet\s{1,3}use\b[^\n]{0,300}?\s/user:\S{1,200}\s{1,3}(?!/)"
        r"|(?i:ConvertTo-SecureString)\s{1,3}(?:-String\s{1,3})?(?=['\"]))['\"]?(?P<s>[^\s'\"]{1,200})")),
    # (seventy-seventh round, kept before:) `openssl enc -k X`, `rclone config create R sftp pass X`, and a password piped
    # into a registry login (`echo X | docker login --password-stdin`)
    ("cli-password-piped", ("openssl", "rclone", "password-stdin"), lazy(
        r"(?:\bopenssl\b[^\n]{0,200}?\s-k\s{1,3}|\brclone\b[^\n]{0,200}?\s(?:pass|password|--[a-z\-]{0,30}pass(?:word)?)(?:\s{1,3}|=)"
        r"|\b(?:echo|printf)\s{1,3}(?=['\"]?[^\s'\"|]{1,200}['\"]?\s{0,3}\|\s{0,3}(?:sudo\s{1,3})?[a-z0-9_\-]{1,20}\s{1,3}[^\n|]{0,200}--password-stdin))"
        r"['\"]?(?P<s>[^\s'\"|]{1,200})")),
    ("sigv4-signature", ("signature=",), lazy(r"(?i)(?<![A-Za-z0-9])(?:X-Amz-)?Signature=(?P<s>[0-9a-f]{64})(?![0-9a-f])")),
    # openssl's `-passin pass:X` / `-passout pass:X` / `-pass pass:X` and keytool's `-storepass X` / `-keypass X` (eighteenth
    # round: kept in clear; a certificate step of a launch script prints them). openssl's other forms (`env:VAR`, `file:path`)
    # name where the password is, not the password.
    ("openssl-keytool-pass", ("pass:", "storepass", "keypass"), lazy(
        r"(?<![A-Za-z0-9_\-])-(?:pass(?:in|out)?[ \t]{1,3}+pass:|(?:src|dest)?(?:store|key)pass[ \t]{1,3}+)['\"]?(?P<s>[^\s'\"]{1,1000})")),
    ("jwt", ("eyj",), lazy(r"(?P<s>eyJ[A-Za-z0-9_\-]{8,4000}\.eyJ[A-Za-z0-9_\-]{8,8000}\.[A-Za-z0-9_\-]{8,4000})")),
    ("auth-header", ("authorization",), lazy(
        r"(?i)" + _GLUED + r"(?:authorization|proxy-authorization)['\"]?(?:\s{0,3}[:=]\s{0,3}|" + _PCT + r"3A(?:" + _PCT + r"20)?)['\"]?"
        # any scheme (RFC 7235: ApiKey, Key, SSWS, ...; tenth round) when its credentials hold a digit, as keys do
        r"(?:bearer|basic|token|digest|[a-z][a-z0-9_\-]{1,30}(?=(?:\s{1,3}|" + _PCT + r"20|\+)[A-Za-z._~+/=\-]{0,4000}\d))"
        r"(?:\s{1,3}|" + _PCT + r"20|\+)(?P<s>[A-Za-z0-9._~+/=\-]{6,4000})")),
    # `Authorization: <key>` with no scheme (AssemblyAI's and Pexels' APIs take the key so): a credential of 16 characters or
    # more holding a digit, alone up to a quote, a comma, a brace or the line's end (twenty-second round: kept in clear)
    ("auth-header-bare", ("authorization",), lazy(
        r"(?i)" + _GLUED + r"(?:authorization|proxy-authorization)['\"]?(?:\s{0,3}[:=]\s{0,3}|" + _PCT + r"3A(?:" + _PCT + r"20)?)['\"]?"
        r"(?P<s>(?=[A-Za-z._~+/=\-]{0,4000}\d)[A-Za-z0-9._~+/=\-]{16,4000}+)(?=['\",;}\]\r]|\s*$)")),
    ("bearer", ("bearer",), lazy(r"(?i)" + _GLUED + r"bearer(?:\s{1,3}|" + _PCT + r"20|\+)(?P<s>[A-Za-z0-9._~+/=\-]{16,4000})")),
    # user:password@ in a URL, whatever the scheme's case, with an empty user (`redis://:pw@`), and a password holding
    # '/' or '@' (unencoded, as people write them): the password ends at the '@' the host follows, not at the first;
    # a port and a path (`https://host:8443/a@b`) are not a password. A user of up to 2,000 characters (a token as the user,
    # `https://<JWT>:x-oauth-basic@host`; over 200 kept the password in clear before the twelfth round).
    # Seventy-seventh round: also a scheme-relative URL (`//bob:PW@host`, as a redirect's Location may be) and a user that
    # is an e-mail address (`http://bob@corp.com:PW@host`): each kept the password, in a log and in a redirect's error.
    ("url-password", ("://",), lazy(
        r"(?i)\b[a-z][a-z0-9+.\-]{1,20}://[^\s:/@]{0,2000}(?:@[a-z0-9\-]{1,63}(?:\.[a-z0-9\-]{1,63}){0,8}\.[a-z]{2,24}(?=:))?"
        r":(?![0-9]{1,5}(?:/|$))(?P<s>\S{1,200}?)@" + _HOST)),
    ("url-password-scheme-relative", ("//",), lazy(
        r"(?i)(?:(?<=[\s'\"=(<,\[`])|^)//[^\s:/@]{1,2000}:(?![0-9]{1,5}(?:/|$))(?P<s>[^\s/]{1,200}?)@" + _HOST)),
    # a URL whose user is a key of 32 to 64 hex digits and has no password: a Sentry DSN (`https://<key>@o1.ingest.sentry.io/2`),
    # which lets anyone send events to the project, and a 40-hex OAuth token as a git remote's user (thirteenth round: kept
    # in clear; listed as a gap in the twelfth). A URL's user is never a git SHA.
    # With a password too (twenty-second round): GitHub's `https://<40 hex>:x-oauth-basic@github.com/...` kept the token.
    ("url-hex-key-user", ("://",), lazy(r"(?i)\b[a-z][a-z0-9+.\-]{1,20}://(?P<s>[0-9a-f]{32,64})(?::[^\s:/@]{1,200})?@" + _HOST)),
    # the same URL URL-encoded once or twice, as a query value or a flag carries it: %3A%2F%2F, %40
    ("url-password-encoded", ("%3a%2f%2f", "%253a%252f%252f"), lazy(
        r"(?i)\b[a-z][a-z0-9+.\-]{1,20}" + _PCT + r"3A" + _PCT + r"2F" + _PCT + r"2F(?:(?!" + _PCT + r"(?:3A|40|2F))[^\s&/@]){0,200}"
        + _PCT + r"3A(?P<s>(?:(?!" + _PCT + r"40)[^\s&]){1,200}?)" + _PCT + r"40(?:(?!" + _PCT + r"40)[A-Za-z0-9.\-\[\]:%]){1,255}"
        r"(?:" + _PCT + r"2F|[\s&'\"]|$)")),
    # A signed URL's signature grants what the URL names, to whoever holds it: an Azure SAS `sig=`, S3 and GCS
    # pre-signed `X-Amz-Signature=` / `X-Goog-Signature=`, and the session token a pre-signed S3 URL carries.
    ("signed-url", ("sig=", "signature=", "security-token="), lazy(
        r"(?i)[?&](?:sig|signature|x-amz-signature|x-goog-signature|x-amz-security-token)=(?P<s>[^&\s'\"#]{8,4000})")),
    # a Slack incoming webhook: its last path part is the secret that lets anyone post to the channel
    ("slack-webhook", ("hooks.slack.com",), lazy(r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/]{1,100}/(?P<s>[A-Za-z0-9]{16,128})")),
    # .netrc: `machine H login U password P` on one line, or `password P` on a line of its own. An assignment's
    # operator is not a password: `password = X` (an ini file, .pypirc) masked the `=` and kept X before the ninth round.
    ("netrc-password", ("password",), lazy(
        r"(?i)(?:(?<![A-Za-z0-9])(?:machine|login|default)\s{1,3}\S{0,200}\s{1,3}|(?m:^)[ \t]{0,20})password[ \t]{1,3}"
        r"(?!(?:[:=\uff1a\uff1d]{1,2}|=>|->|<-)(?:\s|$))(?P<s>[^\s'\"|]{1,1000})")),
    # Fifty-third round (each kept in clear): a secret's value on the line below its name, after a shell line continuation
    # (`--hub_token \` over `    X \`, as `bash -v` or `set -v` echoes a launch script) or a YAML block scalar
    # (`password: |-` over `  X`): the flag rule took the `\` as the value, and the value line was left alone.
    ("secret-continued", ("\\", "|", ">"), lazy(  # its continuation's characters: a cheap gate (the keyword prefix is not)
        # from a line's start (a short scan to the name): the name's own prefix tried at every position cost 5x random text
        r"(?im)^[^\n]{0,500}?" + _START + r"['\"]?(?:--?)?[a-z0-9_.\-]{0,40}" + _KEYWORD + r"['\"]?(?:[ \t]{1,3}+\\|[ \t]{0,3}+[:=][ \t]{0,3}+(?:\\|[|>][+\-]?[0-9]?))"
        r"[ \t]{0,3}+\r?\n(?:" + _LINE_NUMBER + r")?[ \t]{0,40}+['\"]?(?P<s>(?![$<\[%\\]|--?[a-z])[^\s'\"]{4,1000})")),
    # ... and a variable printed as `NAME VALUE` on a line of its own (`for k, v in os.environ.items(): print(k, v)`): an upper
    # case name holding a keyword, one space or tab, one word (fifty-third round: AWS_SECRET_ACCESS_KEY and DB_PASSWORD kept).
    ("env-name-space-value", _KEY_NEEDLES + ("pass", "pwd"), lazy(
        r"(?m)^[\s'\">]{0,8}" + _RANK_PREFIX + r"(?:\d{1,12}\s{0,4}[:|]\s{0,4})?[A-Z0-9_]{0,60}(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|PASS|PWD)"
        r"(?:_?[0-9]{1,3}|_(?:BASE|PROD|PRODUCTION|DEV|STAGING|STAGE|TEST|PRIMARY|SECONDARY|BACKUP|OLD|NEW|MAIN|RO|RW|READ|WRITE|ADMIN|ROOT|V[0-9]{1,2}))?"
        r"[ \t]{1,3}+(?P<s>(?![$<\[%]|(?i:true|false|none|null|set|unset|missing|not)\b|[0-9.]{1,30}[ \t]*$)[^\s'\"]{4,1000})[ \t]*\r?$")),
    # --api-key X, --hf_token=X, --aws-secret-access-key 'X', and argv printed as a list: '--token', 'X'.
    # Thirtieth round: the same list pretty-printed, one element a line (W&B's wandb-metadata.json `"args"`, written with
    # indent=4: `"--hf_token",` over `"X",`): a quoted flag ending its line with `,`, and the quoted value starting the
    # next, behind its indentation and a line number as grep and an excerpt print it (`9: `, ` 10 | `). Before, no rule
    # took the value, and the whole-text pass masked grep's `9:` prefix as the flag's value: a value on the next line never
    # starts with one (_LINE_NUMBER), and a next element that is itself a flag (`"--use_auth_token",` over `"--output_dir",`) is none.
    ("cli-secret-flag", _KEY_NEEDLES, lazy(
        r"(?i)" + _START + r"--?[a-z0-9_.\-]{0,40}" + _KEYWORD + r"(?:['\"]?(?:\s{1,3}|=|,\s{0,2}|" + _PCT + r"3[Dd]|" + _PCT + r"20|\+)['\"]?"
        r"|['\"],[ \t]{0,3}+\r?\n(?:" + _LINE_NUMBER + r")?[ \t]{0,40}+['\"](?!--?[a-z]))"
        r"(?!(?:(?<=\n)|(?<=\n[ \t])|(?<=\n[ \t]{2}))" + _LINE_NUMBER + r")(?!\\[ \t]{0,3}(?:\r?\n|$))"
        r"(?!\[REDACTED\])(?P<s>" + _quoted(1) + r"[^\s'\",\]]{1,1000})")),  # a value masked by an earlier pass: no call back
    # A secret-bearing name and its value in two fields: an environment entry of a Kubernetes, Vertex AI or Docker spec
    # ({"name": "WANDB_API_KEY", "value": "X"}, `- name: HF_TOKEN` over `  value: X`), an MLflow param or tag as its REST
    # API returns it ({"key": "db_password", "value": "X"}), and W&B's config.yaml, where each entry's value sits two lines
    # below its name (`db_password:`, `  desc: null`, `  value: X`). The name rules below see none of them (sixth round).
    # Thirtieth round: AWS SSM's get-parameter output (`{"Parameter": {"Name": "/prod/db/password", "Type": "SecureString",
    # "Value": "X", ...}}`, on one line or pretty-printed): a Name that is a path ending in a keyword, and other fields of the
    # same object (a string, a number, a word) between it and the Value. Each kept the value in clear.
    ("named-value", ("value",), lazy(
        r"(?i)" + _START + r"['\"]?(?:name|key)['\"]?\s{0,3}[:=]\s{0,3}['\"]?[a-z0-9_.\-/]{0,200}" + _KEYWORD
        + r"['\"]?(?:[\s,]{1,40}+['\"]?[a-z_]{1,40}+['\"]?\s{0,3}+[:=]\s{0,3}+(?:\"[^\"\n]{0,200}+\"|'[^'\n]{0,200}+'|[^\s'\",{}\[\]]{0,200}+)){0,6}"
        r"[\s,]{1,40}['\"]?value['\"]?\s{0,3}[:=]\s{0,3}['\"]?(?![<\[]|[0-9.]{1,30}(?![^\s'\",}&\])]))(?P<s>[^\s'\",}&\])]{4,1000})")),
    # ... and a secret-bearing name whose value is an object holding it: W&B's config as JSON ({"db_password": {"desc":
    # null, "value": "X"}}), a Vertex AI pipeline's runtime parameters ({"hf_token": {"stringValue": "X"}}).
    ("nested-value", ("value",), lazy(
        r"(?i)" + _START + r"['\"]?[a-z0-9_.\-]{0,40}" + _KEYWORD + r"['\"]?\s{0,3}:\s{0,3}\{[^{}]{0,200}?['\"]?(?:value|stringValue|string_value)"
        r"['\"]?\s{0,3}:\s{0,3}['\"]?(?![<\[]|[0-9.]{1,30}(?![^\s'\",}&\])]))(?P<s>[^\s'\",}&\])]{4,1000})")),
    ("wandb-config-yaml", ("desc:",), lazy(
        r"(?im)^[ \t]{0,40}[a-z0-9_.\-]{0,40}" + _KEYWORD + r":[ \t]{0,3}\r?\n[ \t]{1,40}desc:[^\n]{0,400}\n[ \t]{1,40}value:[ \t]{0,3}"
        r"['\"]?(?![<\[]|[0-9.]{1,30}(?![^\s'\",}&\])]))(?P<s>[^\s'\",}&\])]{4,1000})")),
    # An XML element named for a secret (Maven's settings.xml `<password>X</password>`, `<hub_token>X</hub_token>`), printed
    # by a CI step: kept in clear before the fourteenth round. The value is what stands between the tags.
    # Fifteenth round: the element may carry attributes (`<password type="text">`, `<ns:password xmlns:ns="...">`) and its
    # value sit in a CDATA section (`<password><![CDATA[X]]></password>`), and an element may be named for a secret by its
    # `name` or `key` attribute (`<entry key="password">X</entry>` in Java's XML properties, `<string name="api_key">`
    # in an Android resource, `<param name="hub_token">`): each was kept in clear.
    ("xml-secret-element", ("</",), lazy(
        r"(?i)<[a-z0-9_.:\-]{0,40}(?:" + _KEYWORD + r"(?:\s[^<>]{0,200})?|\s[^<>]{0,200}?(?<![a-z0-9_\-])(?:name|key)\s{0,3}=\s{0,3}['\"]"
        r"[a-z0-9_.\-]{0,40}" + _KEYWORD + r"['\"][^<>]{0,200})>\s{0,3}(?:<!\[CDATA\[\s{0,3})?(?![0-9.]{1,30}\s{0,3}(?:\]\]>)?<)"
        r"(?P<s>(?:(?!\]\]>)[^<>\s]){4,1000})\s{0,3}(?:\]\]>)?\s{0,3}</")),
    # Sixteenth round (each listed as kept by the fifteenth): a property list's `<key>api_key</key><string>X</string>` (the
    # value in the next element), the XML element written with HTML entities (`&lt;password&gt;X&lt;/password&gt;`, a log
    # page's escaped text), and an element whose closing tag is not on its line (`<password>X` at the line's end, the value
    # right after the tag).
    ("plist-secret", ("<key>",), lazy(
        r"(?i)<key>\s{0,3}[a-z0-9_.\-]{0,40}" + _KEYWORD + r"\s{0,3}</key>\s{0,40}<string>\s{0,3}(?P<s>[^<>\s]{4,1000})\s{0,3}</string>")),
    ("xml-secret-entity", ("&lt;/",), lazy(
        r"(?i)&lt;[a-z0-9_.:\-]{0,40}" + _KEYWORD + r"(?:\s[^&<>]{0,200})?&gt;\s{0,3}(?P<s>(?:(?!&lt;)[^<>\s]){4,1000}?)\s{0,3}&lt;/")),
    ("xml-secret-unclosed", _KEY_NEEDLES, lazy(
        r"(?im)<[a-z0-9_.:\-]{0,40}" + _KEYWORD + r">(?P<s>[^<>\s]{4,1000})[ \t]{0,3}$")),
    # Eighteenth round (each listed as kept since the thirteenth to fifteenth rounds): a secret-bearing name and its value as
    # two strings of a call or a tuple (`os.environ.setdefault("HF_TOKEN", "X")`, `os.putenv(...)`, `getenv("API_KEY", "X")`,
    # PowerShell's `SetEnvironmentVariable('HF_TOKEN', 'X')`, `('api_key', 'X')`: a traceback prints the source line), the
    # value of an element named for a secret given in its `value` attribute (`<secret_key value="X"/>`), and a variable set
    # with no `=` by csh's `setenv`, fish's `set -gx` or a Dockerfile's `ENV NAME X` (a build log prints each step), and
    # Windows' `setx NAME X` (twenty-second round).
    ("keyword-tuple", _KEY_NEEDLES, lazy(
        # not JSON's '"pattern":"api-key","total_matches":1' (a value after a colon, then the next key): no tuple
        r"(?i)(?<![A-Za-z0-9_\-])(?<!:)(?<!: )['\"][a-z0-9_.\-]{0,40}" + _KEYWORD + r"['\"][ \t]{0,3}+,[ \t]{0,3}+(?:[rbuf]{1,2}+)?['\"]"
        r"(?![<\[]|(?:none|null|true|false|[0-9.]{1,30}+)['\"])(?P<s>[^'\"\n]{4,1000}+)(?=['\"](?![ \t]{0,3}+:))")),
    ("xml-secret-value", ("value",), lazy(
        r"(?i)<[a-z0-9_.:\-]{0,40}" + _KEYWORD + r"\s[^<>]{0,200}?(?<![a-z0-9_\-])value\s{0,3}+=\s{0,3}+['\"]"
        r"(?![0-9.]{1,30}+['\"])(?P<s>[^'\"<>\n]{4,1000}+)['\"]")),
    ("shell-set-secret", ("setenv", "set -", "env ", "setx"), lazy(
        r"(?i)(?<![A-Za-z0-9_\-])(?:setenv|setx|set[ \t]{1,3}+-[a-z]{1,4}+|env)[ \t]{1,3}+[a-z0-9_]{0,40}" + _KEYWORD
        + r"[ \t]{1,3}+['\"]?(?![$<\[%]|[0-9.]{1,30}(?![^\s'\",}&\])]))(?P<s>" + _quoted(4) + r"[^\s'\",}&\])]{4,1000})")),
    # `PWD=X` and `*_PASS=X`, `*_PWD=X` (an ODBC connection string's `UID=u;PWD=X;`, MySQL's `MYSQL_PWD`, `DB_PASS`,
    # RabbitMQ's `RABBITMQ_DEFAULT_PASS`): listed as kept until the sixteenth round. Upper case (ODBC's `Pwd`/`pwd` too), and
    # never a path, a shell expansion or a literal: the shell's own `PWD=/home/u` and `two_pass=True` are not secrets.
    # Seventy-sixth round: also as the value of an option or a list (`--from-literal=DB_PASS=X`, `--set-env-vars=A=1,DB_PASS=X`,
    # `?u=a&MYSQL_PWD=X`), which kept X in clear.
    ("pass-pwd-assign", ("pwd", "pass"), lazy(
        r"(?<![^\s'\";{(=,&])(?:[A-Z0-9_]{0,40}_)?(?:PASS|PWD|Pwd|pwd)\s{0,3}=\s{0,3}['\"]?"
        r"(?![/~$%(<\[]|(?i:true|false|none|null|yes|no)\b|[0-9.]{1,30}(?![^\s'\";,}&\])]))(?P<s>[^\s'\";,}&\])]{4,1000})")),
    # ... and a service's own short name for its password in any case (`db_pass=X`, `dbPass: X`, `smtp_pass: X`,
    # `redis.pass=X`; seventy-sixth round: kept in clear), under the same never-a-path-or-literal rule.
    ("service-pass-assign", ("pass",), lazy(
        r"(?i)(?<![A-Za-z0-9])(?:db|smtp|mail|email|redis|mysql|postgres|pg|mongo|ldap|ftp|sftp|smb|proxy|admin|root|rabbitmq|amqp|database)"
        r"[_.\-]?pass(?:wd)?['\"]?\s{0,3}[:=]\s{0,3}['\"]?"
        r"(?![/~$%(<\[]|(?i:true|false|none|null|yes|no)\b|[0-9.]{1,30}(?![^\s'\";,}&\])]))(?P<s>[^\s'\";,}&\])]{4,1000})")),
    # NAME=X, NAME: X, "name": "X", ?access_token=X&, X-API-KEY: X, and URL-encoded %3D / %3A.
    # A tokenizer's special tokens (`eos_token: </s>`, `pad_token = [PAD]`) and plain numbers are not secrets.
    # Twenty-seventh round: a value that is itself a secret's name and its operator (`password: password = X`,
    # `api_token: api_key = X`) is no value: the mask took the name and kept X in clear. Such a start fails, and the
    # name's own match masks X.
    ("keyword-secret-assign", _KEY_NEEDLES, lazy(
        r"(?i)" + _START + r"[a-z0-9_.\-]{0,40}" + _KEYWORD + _ASSIGN + r"(?![<\[]|[0-9.]{1,30}(?![^\s'\",}&\])])|desc:)"
        r"(?![a-z0-9_.\-]{0,40}" + _KEYWORD + r"\s{0,3}+[ \t]{0,40}+(?:::?=|[:=]|=>|->))(?P<s>" + _quoted(4) + r"[^\s'\",}&\])]{4,1000})")),
]


def _mask(match: re.Match[str]) -> str:
    whole, (a, b) = match.group(0), match.span("s")
    start = match.start(0)
    return whole[: a - start] + MASK + whole[b - start :]


MAX_PASSES = 4


def redact_counted(text: str) -> tuple[str, int]:
    """Return the text with every secret replaced by [REDACTED], and how many were replaced.

    Invisible characters and terminal escapes are stripped first (safety/invisible.py): a token split
    by a zero-width space or an ANSI colour code is joined again and caught; so is one split by the JSON escape or the HTML
    character reference of such a character (`\\u200b`, `&#8203;`), and a combining mark between two ASCII characters is
    read as absent (thirtieth round). What went is added to this context's `stripped_count`. A mask can expose a match another rule's earlier match had consumed (`"private_key":"7"private_key":"x`
    once a flag rule has masked the first key), so passes repeat until one replaces nothing: the
    result is a fixed point, and redacting it again changes nothing. Text without secrets costs one pass.
    """
    text, total, gone = _prepared(text)
    if gone:
        _stripped.set(_stripped.get() + gone)
    return _passes(text, total)


def _prepared(text: str) -> tuple[str, int, int]:
    """The text as the rules read it (stripped, unescaped, its ASCII reading's secrets masked), how many masked, and
    how many characters were stripped (for the caller to count)."""
    text, gone, masks = stripped_and_masked(text)
    text, dropped = unescaped_counted(text)
    text, n, marks = _masked_as_read(text)
    text, e = _masked_as_unescaped(text)
    return text, n + masks + e, gone + dropped + marks


def count_masks(n: int) -> None:
    """Add `n` masks made outside the rules (safety/invisible.strip_invisible's) to this context's redactions."""
    _count.set(_count.get() + n)


_WORD = lazy(r"[A-Za-z0-9_\-]+")


def _word_edge(words: list[tuple[int, int]], starts: list[int], i: int, otherwise: int, side: int) -> int:
    """The start (`side` 0) or end (1) of the word (letters, digits, `_`, `-`) holding index `i` of the text, or `otherwise`
    when no word holds it: how far a mask reaching `i` widens."""
    k = bisect.bisect_right(starts, i) - 1
    return words[k][side] if i >= 0 and k >= 0 and words[k][0] <= i < words[k][1] else otherwise


_BYTE_SHOWN = lazy(r"\\x[89a-f][0-9a-f]")  # a byte of a file name that is not UTF-8, as invisible._byte shows it


def _left_out(text: str, j: int) -> int:
    """How many characters at `j` of the shown text a joined reading leaves out (a U+FFFD, a `\\xff`), or 0."""
    return 1 if text[j] == "\ufffd" else 4 if _BYTE_SHOWN.match(text, j) else 0


def masked_as_joined(text: str, joined: str) -> tuple[str, int]:
    """`text` (stripped) with the secrets its joined reading holds masked (see invisible.joined_readings), and how many:
    called by safety/invisible, so every channel that strips before it redacts gets it.
    A joined reading is `text` with an escape's letters inserted where it sat, and its U+FFFD and bad bytes left out: the
    two are aligned by walking both, an unmatched character of the reading being one of those letters."""
    read, _n = settled(joined.replace(_FILL, "?"), fill=True)
    runs = [m.span() for m in re.finditer(_FILL + "+", read)]
    if not runs:
        return text, 0
    where: list[int] = []  # the index in `text` of each character of the reading, -1 for an inserted letter
    j = 0
    for c in joined:
        while j < len(text) and c != text[j] and (skip := _left_out(text, j)):  # a U+FFFD or a bad byte the reading left out
            j += skip
        if j < len(text) and c == text[j]:
            where.append(j)
            j += 1
        else:
            where.append(-1)
    own = settled(text.replace(_FILL, "?"), fill=True)[0]  # what the rules mask in the text shown, in place
    words = [m.span() for m in _WORD.finditer(text)]  # found once: widening each mask by walking was k masks x n (72nd round)
    starts = [a for a, _ in words]
    spans = []
    for a, b in runs:
        shown = [i for i in where[a:b] if i >= 0]
        if len(shown) == b - a and all(own[i] == _FILL for i in shown):
            continue  # the rules mask it in the text shown, in its own bounds: no wider mask (a file name's `run-` kept)
        if shown:  # widened to the whole word around it: a mask inside a token would split it for the rules that follow
            spans.append((_word_edge(words, starts, shown[0] - 1, shown[0], 0), _word_edge(words, starts, shown[-1] + 1, shown[-1] + 1, 1)))
    merged: list[list[int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:  # overlapping or touching runs: one mask
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    out: list[str] = []
    at = 0
    for a, b in merged:
        out += [text[at:a], MASK]
        at = b
    return "".join([*out, text[at:]]), len(merged)


def _passes(text: str, total: int, among: tuple[str, ...] | None = None) -> tuple[str, int]:
    """The rules' passes until one replaces nothing; the first looks only for the needles `among` (all when None)."""
    text, n = settled(text, among=among)
    return text, total + n


# Characters that read as an ASCII one, mapped to it one for one (offsets kept): fullwidth forms (`password：X`,
# `api_key＝X` in text typed with a CJK input method, `ｐａｓｓｗｏｒｄ`), the ideographic space and the other wide spaces
# (seventy-sixth round: `password<NBSP>X`, `hub_token<EM SPACE>X` kept X where a space did not), and the dashes a word
# processor or chat client puts in a pasted command (`--api‐key X`, `–token X`). Every rule is written in ASCII;
# before the ninth round each of these kept its secret. U+E000 (the fill character) is never taken for one.
READ_AS = {**{c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}, **{c: 0x20 for c in (0xA0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000)}, **{c: 0x2D for c in (*range(0x2010, 0x2016), 0x2212, 0xFE58, 0xFE63)},
            0x2018: 0x27, 0x2019: 0x27, 0x201C: 0x22, 0x201D: 0x22, 0xE000: 0x3F}


def _letters_read_as_ascii() -> dict[int, int]:
    """Letters and signs a reader takes for ASCII ones (sixteenth round: `ᴘᴀꜱꜱᴡᴏʀᴅ=X`, `𝐩𝐚𝐬𝐬𝐰𝐨𝐫𝐝=X`, `ⓟⓐⓢⓢⓦⓞⓡⓓ=X`,
    `passwоrd=X` with a Cyrillic о, `password﹕ X` with a small colon kept X in clear): each character of the blocks below
    whose compatibility form (NFKC) is one printable ASCII character, the small capitals (no compatibility form), and the
    Cyrillic and Greek letters drawn like a Latin one. Mapped one for one, like READ_AS: only the reading changes."""

    blocks = ((0x1D400, 0x1D800), (0x2460, 0x2500), (0x1F100, 0x1F1AE), (0xFE10, 0xFE20), (0xFE50, 0xFE70), (0x2070, 0x20A0),
              (0x1D2C, 0x1D6B), (0x2100, 0x2150), (0x2150, 0x2190), (0x02B0, 0x02E5), (0x2024, 0x2025))
    out = {}
    for a, b in blocks:
        for c in range(a, b):
            nf = unicodedata.normalize("NFKC", chr(c))
            if len(nf) == 1 and nf.isascii() and nf.isprintable() and nf != " ":
                out[c] = ord(nf)
    small = dict(zip("ᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘꞯʀꜱᴛᴜᴠᴡʏᴢ", "abcdefghijklmnopqrstuvwyz", strict=True))
    cyrillic = dict(zip("аеорсухѕіјԁԛԝһАВЕКМНОРСТХЅІЈ", "aeopcyxsijdqwhABEKMHOPCTXSIJ", strict=True))
    greek = dict(zip("οανρικΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "oavpikABEZHIKMNOPTYX", strict=True))
    colons = dict.fromkeys("ː˸։׃܃܄᛬᠃᠉⁚∶꞉", ":")
    equals = dict.fromkeys("꞊᐀⹀゠", "=")
    out.update({ord(k): ord(v) for k, v in (*small.items(), *cyrillic.items(), *greek.items(), *colons.items(), *equals.items())})
    return out


READ_AS.update({c: a for c, a in _letters_read_as_ascii().items() if c not in READ_AS})


def _masked_as_read(text: str) -> tuple[str, int, int]:
    """`text` with the secrets its ASCII reading holds masked (see READ_AS), how many, and how many combining marks went
    inside the masks (see _MARK_RUN); ASCII text as it is."""
    if text.isascii():
        return text, 0, 0
    read = text.translate(READ_AS)
    gaps = [m.span() for m in _MARK_RUN.finditer(read) if all(map(is_mark, m.group(0)))]
    if not gaps and read == text.replace(_FILL, "?"):
        return text, 0, 0
    return _masked_through(text, read, gaps)


def _masked_through(text: str, read: str, gaps: list[tuple[int, int]]) -> tuple[str, int, int]:
    """`text` with the secrets masked that `read` (a reading of it, as long, each character standing for the one in the
    same place) holds once its `gaps` are dropped; how many, and how many gap characters went inside the masks."""
    # the reading without the gaps, and where each of its characters stands in `text` (one entry per gap: from the
    # reading's index where the gap was, add its width)
    at, shift = 0, 0
    cuts: list[int] = []
    shifts: list[int] = []
    parts: list[str] = []
    for a, b in gaps:
        parts.append(read[at:a])
        shift += b - a
        cuts.append(a - (shift - (b - a)))
        shifts.append(shift)
        at = b
    read = "".join([*parts, read[at:]])

    def where(i: int) -> int:  # the index in `text` of the reading's character i
        k = bisect.bisect_right(cuts, i)
        return i + (shifts[k - 1] if k else 0)

    read, _n = settled(read, fill=True)
    runs = [(where(m.start()), where(m.end() - 1) + 1) for m in re.finditer(_FILL + "+", read)]
    if not runs:
        return text, 0, 0
    out: list[str] = []
    at, marks = 0, 0
    for a, b in runs:
        out += [text[at:a], MASK]
        marks += sum(min(b, gb) - max(a, ga) for ga, gb in gaps if ga < b and gb > a)
        at = b
    return "".join([*out, text[at:]]), len(runs), marks


# Seventy-seventh round: a printed escape of a line break, a tab or a control before a name (`'host: h\npassword: X'` in a
# repr or a JSON string, http.client's `\r\nAuthorization: Basic X`, an environ dump's `\x00DB_PASSWORD=X`) and a colour
# code written as an escape around one (`\u001b[1mDB_PASSWORD\u001b[0m=X` in a docker json-file line, `\033[1m` in a repr)
# hid the name from every rule. They are shown as written; for matching, an escape of a line break or a tab reads as that
# character, one of another control as a space, and a colour code's escape as nothing.
_PRINTED_ESCAPE = lazy(r"\\{1,2}(?:(?:u001[bB]|x1[bB]|033|e)\[[0-9;]{0,16}[A-Za-z]|[nrt]|[fv0](?![0-7])|x[01][0-9A-Fa-f]"
                       r"|u00[01][0-9A-Fa-f]|0[0-3][0-7])")
_MEANS = {"n": "\n", "r": "\r", "t": "\t"}


def _masked_as_unescaped(text: str) -> tuple[str, int]:
    """`text` with the secrets masked that its reading with printed escapes read as what they stand for holds (see
    _PRINTED_ESCAPE), and how many."""
    if "\\" not in text:
        return text, 0
    read, gaps = ["?" if c == _FILL else c for c in text], []
    for m in _PRINTED_ESCAPE.finditer(text):
        a, b = m.span()
        body = m.group(0).lstrip("\\")
        if "[" in body:  # a colour code: nothing
            gaps.append((a, b))
        else:
            read[a] = _MEANS.get(body, " ")
            gaps.append((a + 1, b))
    if not gaps:
        return text, 0
    text, n, _inside = _masked_through(text, "".join(read), gaps)
    return text, n


# Thirtieth round: a combining mark (Unicode's Mn and Me) between two ASCII letters, digits or `_-` inside a token
# (`ghp_A1b2C3<U+0301>d4E5...`, no keyword near) kept it whole: no pattern matched across the mark. It is read as if absent,
# like the zero-width characters stripped before (safety/invisible.py), but only for matching: text written in decomposed
# form (`Re<U+0301>sume<U+0301>`, a macOS file name) is shown as it is; the marks inside a secret go with its mask, counted as
# stripped.
_MARK_RUN = lazy(r"(?<=[A-Za-z0-9_\-])[^\x00-\x7f]{1,16}(?=[A-Za-z0-9_\-])")


_FILL = "\ue000"  # a private-use character: masks a secret in place, keeping every offset (redact_after)


def _fill(match: re.Match[str]) -> str:
    whole, (a, b) = match.group(0), match.span("s")
    start = match.start(0)
    return whole[: a - start] + _FILL * (b - a) + whole[b - start :]


# The two keyword rules (cli-secret-flag, keyword-secret-assign) can only match where a keyword of _KEYWORD ends
# its word, and their patterns are the dearest of all: a line of an ordinary log that holds the needle inside a word
# (`tokens/s`, `keyword`, `secrets_dir`) paid about 60 us for them. Every _KEYWORD alternative ends in one of these
# words, followed by a character that is not a letter (`apikey` by anything): on ASCII text, where the rules' (?i)
# folds nothing but A-Z, a text with none of them cannot match either rule, so both are skipped. Other text (Unicode
# folds 'ſ' to s and 'ı' to i) always runs them.
_KEYWORD_ENDS = lazy(r"apikey|(?:key|token|secret|passw(?:or)?d|passphrase)(?![a-z])")
_KEYWORD_RULES = frozenset({"cli-secret-flag", "keyword-secret-assign", "named-value", "nested-value", "wandb-config-yaml",
                            "xml-secret-unclosed", "keyword-tuple", "xml-secret-value", "shell-set-secret"})
_NEEDLES = tuple(dict.fromkeys(n for _name, needles, _rx in _RULES for n in needles))


def _no_keyword(text: str) -> bool:
    """True when neither keyword rule can match `text` (see _KEYWORD_ENDS); False when they must run."""
    return text.isascii() and _KEYWORD_ENDS.search(text.lower()) is None


@functools.lru_cache(maxsize=64)
def _rules_among(among: tuple[str, ...]) -> list[tuple[str, tuple[str, ...], re.Pattern[str]]]:
    """The rules that can run on a text holding no needle but these: the needle-less ones and those naming one."""
    return [r for r in _RULES if not r[1] or not set(r[1]).isdisjoint(among)]


def _one_pass(text: str, fill: bool = False, among: tuple[str, ...] | None = None) -> tuple[str, int]:
    """One pass of every rule whose needles `text` holds; `among`: the only needles it can hold (redact_lines)."""
    return settled(text, fill, among, passes=1)


def settled(text: str, fill: bool = False, among: tuple[str, ...] | None = None, passes: int = MAX_PASSES) -> tuple[str, int]:
    """The rules' passes until one replaces nothing (at most `passes`), and how many they replaced; the first pass looks
    only for the needles `among` (all when None). A mask can expose a match another rule's earlier match had consumed, so
    passes repeat; but a rule runs again only if the text changed since it last ran (its own replacement counts: `sub`
    skips matches overlapping one it took). On the same text a rule finds the same nothing, so a line whose one rule masked
    80,000 argv flags costs that rule twice, not every rule twice (the quoted-argv line of tests/security/test_redact.py
    cost 5x ordinary text, and the clean-clone CI run of f8d816f0 failed on it)."""
    total, step, changed = 0, 0, -1
    ran: list[int | None] = [None] * len(_RULES)  # the step at which each rule last ran
    for p in range(passes):
        replaced = 0
        lower = text.lower()  # redaction only removes needles ("[redacted]" holds none), so this stays a superset
        present = {n for n in (_NEEDLES if among is None or p else among) if n in lower}  # each needle looked for once
        no_keyword: bool | None = None  # judged on the text as the earlier rules left it, once a pass
        for i, (name, needles, rx) in enumerate(_RULES):
            step += 1
            if needles and present.isdisjoint(needles):
                continue
            if (last := ran[i]) is not None and changed < last:
                continue  # the text is as this rule left it
            if name in _KEYWORD_RULES:
                if no_keyword is None:
                    no_keyword = _no_keyword(text)
                if no_keyword:
                    continue
            ran[i] = step
            text, found = _applied(rx, text, fill)
            if found:
                replaced, changed = replaced + found, step
        total += replaced
        if replaced == 0:
            break
    return text, total


def _applied(rx: re.Pattern[str], text: str, fill: bool) -> tuple[str, int]:
    """`rx`'s matches masked (or filled in place), skipping values already masked, and how many."""
    found = 0

    def sub(m: re.Match[str]) -> str:
        nonlocal found
        s = m.group("s")
        if MASK[:-1] in s or _FILL in s or m.string.startswith(MASK, m.start("s")):  # already redacted (a mask cut by a value's end too)
            return m.group(0)
        found += 1
        return _fill(m) if fill else _mask(m)

    return rx.sub(sub, text), found


def redact_after(context: str, text: str) -> str:
    """Redact `text`, a piece of a line whose start was cut off, judged with the `context` that came before it.

    A byte cap that cuts a line can leave `AWS_SECRET_ACCESS_KEY=` in the part not shown and the value
    at the start of the part shown; no pattern sees a secret there. Redacting context and piece
    together, with secrets masked in place (offsets kept), then keeping only the piece, masks it.
    """
    ctx = strip_invisible(context.replace(_FILL, "?"))[0]
    piece, gone = strip_invisible(text.replace(_FILL, "?"))
    joined = ctx + piece
    joined, _n = settled(joined, fill=True)
    piece = joined[len(ctx):]
    runs = len(re.findall(_FILL + "+", piece))
    if runs:
        _count.set(_count.get() + runs)
        piece = re.sub(_FILL + "+", MASK, piece)
    if gone:
        _stripped.set(_stripped.get() + gone)
    return redact(piece)


def redact_named(name: str, value: str) -> str:
    """Redact a value shown apart from its name (a tracker's config entry, an MLflow param, a field of a dict), judged
    as `name: value`: a value under a secret-bearing name (`db_password`, `hub_token`) is masked as it would be on one
    line. Redacted alone, a plain password under such a name was shown as is (get_wandb_run's `config db_password`)."""
    if not value:
        return value
    return redact_after(f"{str(name)[-200:]}: ", value)


# A secret's name can sit on a line above its value (W&B config.yaml: the name, then `desc:`, then `value:`; a spec's
# `- name: HF_TOKEN` over `  value: X`). A view that starts at a line (a window, a grep block) judges its lines with the
# lines before them. Only the two rules above do that, and their value line holds this word.
PRIOR_LINES = 2


# Thirtieth round: an argv list pretty-printed one element a line (wandb-metadata.json's `"args"`): a quoted secret flag
# ending the line above (`"--hf_token",`) and its value, quoted, starting this one. Judged with the lines above like a
# `value:` line; may_hide says such a line may hide a secret (grep matches a pattern on it as shown).
_LIST_ELEMENT = lazy(r"[ \t]{0,40}+['\"]")


def _next_list_element(above: str, line: str) -> bool:
    return above.rstrip().endswith(("',", '",')) and _LIST_ELEMENT.match(line) is not None


# Fifty-third round: a secret's name ending the line above with a shell line continuation or a YAML block scalar
# (`--hub_token \`, `password: |-`), its value on this line (the rule "secret-continued").
_CONTINUES_A_SECRET = lazy(r"(?i)" + _KEYWORD + r"['\"]?(?:[ \t]{1,3}+\\|[ \t]{0,3}+[:=][ \t]{0,3}+(?:\\|[|>][+\-]?[0-9]?))[ \t]{0,3}+\r?$")


def named_above(prior: list[str], line: str) -> bool:
    """Whether `line` may be a value whose secret's name sits on a line above it: a `value:` line, the next element of an
    argv list printed one a line, or the line after a secret's name ended with a continuation or a block scalar."""
    return bool(prior) and ("value" in line.lower() or _next_list_element(prior[-1], line)
                            or _CONTINUES_A_SECRET.search(prior[-1][-300:]) is not None)


def redact_line_after(prior: list[str], line: str, *, count: bool = True) -> str:
    """One line as shown when the lines before it may not be (each line of an excerpt is shown on its own, behind a
    line number): a value whose name sits on a line above is masked, judged with up to PRIOR_LINES lines before it.
    A line that cannot be such a value comes back unchanged: the channel redacts it as every line.
    `count=False` counts nothing (as_shown): for matching a caller's pattern against what the caller may see."""
    if not named_above(prior, line):
        return line
    ctx = "\n".join(prior[-PRIOR_LINES:]) + "\n"
    saved = _count.get(), _stripped.get()
    out = redact_after(ctx, line)
    masked = _count.get() > saved[0]
    if not (masked and count):
        _count.set(saved[0])
        _stripped.set(saved[1])
    return out if masked else line  # nothing masked: the line as it was (the channel strips and redacts it as every line)


def may_hide(text: str) -> bool:
    """Whether redacting `text` could change it: a rule's needle or a needle-less rule's shape, a character stripped, a
    JSON escape, a form read as ASCII. False: the text is shown as it is, so a caller's pattern may be matched on it raw.
    What it costs does not depend on anything a caller guesses (see mcp_tools/logs._ShownLines)."""
    if may_hide_escaped(text) or hidden_characters(text) or "\ufffd" in text:
        return True
    if _LIST_ELEMENT.match(text):  # the value of a secret flag on the line above (redact_line_after)
        return True
    read = text if text.isascii() else text.translate(READ_AS)  # a progress bar's blocks change nothing: judged like ASCII
    if not read.isascii() and any(all(map(is_mark, m.group(0))) for m in _MARK_RUN.finditer(read)):
        return True  # a combining mark between ASCII letters or digits, read as absent
    if not _needle_or_shape(read):  # most lines of a log: one scan in C
        return False
    lower = read.lower()
    present = {n for n in _NEEDLES if n in lower}
    for name, needles, rx in _RULES:  # the gates of _one_pass: a rule that would not run cannot mask anything
        if needles and present.isdisjoint(needles):
            continue
        if name in _KEYWORD_RULES and _no_keyword(read):
            continue
        if needles or rx.search(read):
            return True
    return False


_NEEDLE_SCAN: list[Any] = []  # [hyperscan database] once built, [None] without hyperscan
_SCRATCH = threading.local()  # a scratch is one scan's working memory: one per thread


def _scratch() -> Any:
    import hyperscan

    if getattr(_SCRATCH, "s", None) is None:
        _SCRATCH.s = hyperscan.Scratch(_NEEDLE_SCAN[0])
    return _SCRATCH.s


def _needle_or_shape(text: str) -> bool:
    """Whether `text` holds any rule's needle, or could be a needle-less rule's line (a PEM body line): a superset of
    what _one_pass can mask, found by one Hyperscan scan where the binding is installed (grep_log asks it of every line)."""
    if not _NEEDLE_SCAN:
        _NEEDLE_SCAN.extend(_needle_database())
    db = _NEEDLE_SCAN[0]
    if db is None:
        lower = text.lower()
        return any(n in lower for n in _NEEDLES) or any(rx.search(text) for _name, needles, rx in _RULES if not needles)
    import hyperscan

    try:
        # lowered first when not ASCII: str.lower() is what _one_pass looks for needles in (U+212A KELVIN SIGN is a 'k')
        data = text if text.isascii() else text.lower()
        db.scan(data.encode("utf-8", errors="replace"), match_event_handler=lambda *_: True, scratch=_scratch())
    except hyperscan.ScanTerminated:  # the handler stops the scan at the first match
        return True
    return False


def _needle_database() -> list[Any]:
    """The needles (ids 0..len(_NEEDLES)-1, caseless) and pem-body-line's shape (the last id), compiled once and kept
    in the cache directory as the engine's databases are (dbcache.py): compiling it took 23-30 ms of every run."""
    try:
        import hyperscan
    except ImportError:  # pragma: no cover - platforms without a wheel
        return [None]
    from ml_skills import dbcache

    exprs = [re.escape(n).encode() for n in _NEEDLES]
    exprs.append(rb"^[\s'\">]{0,8}" + _RANK_PREFIX.encode() + rb"(?:\d{1,12}\s{0,4}[:|]\s{0,4})?[A-Za-z0-9+/]{24,76}")  # pem-body-line's shape, loosely
    flags = [hyperscan.HS_FLAG_CASELESS | hyperscan.HS_FLAG_SINGLEMATCH] * len(_NEEDLES) + [hyperscan.HS_FLAG_SINGLEMATCH]
    return [dbcache.compiled(hyperscan, exprs, list(range(len(exprs))), flags, hyperscan.HS_MODE_BLOCK)]


def _needles_in(lowered: str) -> tuple[str, ...]:
    """`tuple(n for n in _NEEDLES if n in lowered)`, for a text already lowered: one Hyperscan scan of it where the
    binding is installed (0.2 ms for a report's batch of head and tail lines, against 8 ms for 88 `in` searches).
    Exact: every needle is lowercase ASCII, so in UTF-8 it matches only where the text holds it, and a lowered text
    holds no ASCII capital for the caseless flag to fold."""
    if not lowered:
        return ()
    if not _NEEDLE_SCAN:
        _NEEDLE_SCAN.extend(_needle_database())
    db = _NEEDLE_SCAN[0]
    if db is None:
        return tuple(n for n in _NEEDLES if n in lowered)
    found: set[int] = set()

    def on_match(idx: int, _from: int, _to: int, _flags: int, _ctx: object) -> bool:
        found.add(idx)
        return False

    db.scan(lowered.encode("utf-8", errors="surrogatepass"), match_event_handler=on_match, scratch=_scratch())
    return tuple(_NEEDLES[i] for i in sorted(found) if i < len(_NEEDLES))


def redact(text: str) -> str:
    """Redact secrets and add the number replaced to this context's count."""
    if not text:
        return text
    memo = _memo.get()
    done = memo.get(text) if memo is not None else None
    if done is None:
        clean, total, gone = _prepared(text)
        done = (*_passes(clean, total), gone)
        if memo is not None and len(memo) < MEMO_SIZE:
            memo[text] = done
    return _counted(text, done)


def _counted(text: str, done: tuple[str, int, int]) -> str:
    """What redact() returns for `text` redacted as `done` (the text, masks, characters stripped), counted."""
    new, n, gone = done
    if gone:
        _stripped.set(_stripped.get() + gone)
    if new == text:
        return text
    _count.set(_count.get() + n)
    return new


PAST_CUT = 16 * 1024


def redact_cut(text: str, n: int) -> str:
    """The first `n` characters of `text` as shown: redacted, then cut. Cut first, a token or a URL's password crossing the
    cut is no pattern's match and its first part is shown (twentieth round: a traceback message cut at 500 showed
    `ghp_Ab1Cd2E`, the last progress line cut at 300 a password's first characters). What follows the cut is judged up to
    16 KiB, as a read cap's cut is."""
    return redact(text[: n + PAST_CUT])[:n]


def redact_lines(lines: list[str]) -> list[str]:
    """`[redact(x) for x in lines]` for consecutive lines of a log, with the rules' needles looked for once in the whole
    batch, and each line judged with the lines above it too (redact_line_after: fifty-third round, a value below its name).

    Looking for all 87 needles in each of a report's 800-1100 head, tail and excerpt lines was 10 ms of a 10 MiB run; a
    batch of log lines holds few of them (2 in the benchmark log's), and a needle a line holds is in the batch's
    joined text, so each line's first pass looks only for those. Later passes (after a mask) look for all.
    """
    memo = _memo.get()
    if memo is None:
        memo = {}  # this batch's repeated lines redacted once (and counted for each)
    fresh = {x: _prepared(x) for x in lines if x and x not in memo}
    among = _needles_in("\n".join(clean.lower() for clean, _, _ in fresh.values()))
    over: dict[str, tuple[str, int, int]] = {}  # past the memo's cap: kept for this call only
    for x, (clean, total, gone) in fresh.items():
        (memo if len(memo) < MEMO_SIZE else over)[x] = (*_passes(clean, total, among), gone)
    out = [_counted(x, over[x] if x in over else memo[x]) if x else x for x in lines]
    for i, x in enumerate(lines):  # a value whose secret's name ends a line above (the lines are a run of the log's)
        if i and x and (judged := redact_line_after(lines[max(0, i - PRIOR_LINES) : i], x, count=False)) not in (x, out[i]):
            # counted as the masks it adds to the line's own: a line holding its own secret below a list element was
            # counted twice (tests/security/test_redact_lines.py, when the planted key's random body drew such a pair)
            _count.set(_count.get() + max(1, judged.count(MASK) - out[i].count(MASK)))
            out[i] = judged
    return out


MEMO_SIZE = 65536  # texts remembered under remembered(), at most
_memo: ContextVar[dict[str, tuple[str, int, int]] | None] = ContextVar("redaction_memo", default=None)


@contextlib.contextmanager
def remembered() -> Iterator[None]:
    """Within this block (this thread or task), each distinct text is redacted once and its result replayed, counts
    included: the CLI redacts its report's lines while diagnosing, then the whole report before writing it and again as
    the file is written (the last guards), about 190 texts each, 3 ms a walk, most of them texts already redacted.
    Redaction is a function of the text alone, so a replayed result is the one computing it again gives. Only for a
    process that ends with its diagnosis: the memo holds the texts (the log's lines) until the block ends."""
    token = _memo.set({})
    try:
        yield
    finally:
        _memo.reset(token)


def as_shown(text: str) -> str:
    """The text as every output channel shows it (stripped, redacted), without counting anything:
    for matching a caller's pattern against what the caller may see, never against the raw secret."""
    count, stripped = _count.get(), _stripped.get()
    try:
        return redact_counted(text)[0]
    finally:
        _count.set(count)
        _stripped.set(stripped)


def redaction_count() -> int:
    return _count.get()


def reset_redaction_count() -> None:
    _count.set(0)


def stripped_count() -> int:
    """Invisible characters and escape-sequence characters removed by redaction in this context."""
    return _stripped.get()


def reset_stripped_count() -> None:
    _stripped.set(0)



# The MCP SDK's sealed request state (an approval's round trip on the 2026-07-28 protocol): authenticated ciphertext the
# server minted, opaque to the client and holding nothing readable. Redacting it only breaks the round trip: about 3 in
# 10,000 tokens hold 'hf_' and 34 letters or digits by chance (a Hugging Face token's shape), and the approval came back
# "Invalid or expired requestState" (a clean-clone CI run, 2026-12-05). Only the field of an `input_required` result
# itself, the value redact_value was handed (the SDK's model, or its wire mapping with `resultType`), is passed: a key of
# that name anywhere inside a result is data like any other (twenty-sixth round: a report planted in a run folder with a
# `request_state` key handed `read_report`'s structured content a Hugging Face token in clear).
SEALED_FIELDS = frozenset({"request_state", "requestState"})


def _input_required(value: Any) -> bool:
    """An `input_required` interim result, typed or wire-shaped (the SDK's own test, without importing the SDK)."""
    if isinstance(value, dict):
        return value.get("resultType") == "input_required"
    return isinstance(value, BaseModel) and getattr(value, "result_type", None) == "input_required"


def redact_value(value: Any) -> Any:
    """Redact every string inside a pydantic model, list, tuple or dict (keys too), counting in this context.

    The last guard before a result leaves: paths, sources and targets are redacted as well as log
    text, since a token can sit in a directory name. Unchanged parts keep their identity and type
    (an enum stays an enum); models are copied, never mutated. The one field left as it is: the sealed state of an
    `input_required` result handed here whole (SEALED_FIELDS), never a field of that name inside another value.
    """
    if not _input_required(value):
        return _redact_any(value)
    if isinstance(value, dict):
        pairs = [(k, v) if k in SEALED_FIELDS else (_redact_any(k), _redact_item(k, v)) for k, v in value.items()]
        same = all(k2 is k and v2 is v for (k2, v2), (k, v) in zip(pairs, value.items(), strict=True))
        return value if same else dict(pairs)
    return _redact_model(value, skip=SEALED_FIELDS)


def _redact_model(value: BaseModel, skip: frozenset[str] = frozenset()) -> BaseModel:
    """A model's fields redacted (a path field as a path), but those named in `skip`; copied only when one changed."""
    update = {}
    for name in type(value).model_fields:
        if name in skip:
            continue
        old = getattr(value, name)
        new = _redact_path(old) if name in PATH_FIELDS and isinstance(old, str) else _redact_any(old)
        if new is not old:
            update[name] = new
    return value.model_copy(update=update) if update else value


def _redact_any(value: Any) -> Any:
    """redact_value for any value inside a result: every string, with no field left out."""
    if isinstance(value, str):
        new = redact(value)
        return value if new == value else new
    if isinstance(value, BaseModel):
        return _redact_model(value)
    if isinstance(value, (list, tuple)):
        items = [_redact_any(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else type(value)(items)
    if isinstance(value, dict):
        pairs = [(_redact_any(k), _redact_item(k, v)) for k, v in value.items()]
        same = all(k2 is k and v2 is v for (k2, v2), (k, v) in zip(pairs, value.items(), strict=True))
        return value if same else dict(pairs)
    return value


def _redact_item(key: Any, value: Any) -> Any:
    """A dict's value, judged with its key when the key names a secret (`{"db_password": "X"}`: X alone is no pattern's)."""
    if isinstance(key, str) and isinstance(value, str) and _KEYWORD_ENDS.search(key.lower()):
        new = redact_named(key, value)
        return value if new == value else new
    if key in PATH_FIELDS and isinstance(value, str):
        return _redact_path(value)
    return _redact_any(value)


# Fields of a result that hold a path the server resolved or was given (a checkpoint's `path`, an inventory's `root`, an
# answer's `target`), never a line of a printed key. Before the fourteenth round such a field holding only a folder of 24
# to 76 base64 characters with upper and lower case and a digit (`/data/runs/GPT2/exp1`) was masked whole as a PEM key's
# body line: `list_artifacts` answered `"path": "[REDACTED]"`. An absolute path is redacted here as it stands inside a
# line (the approval question's rule since the thirteenth round, `redact_in_line`): every other rule still applies.
PATH_FIELDS = frozenset({"path", "root", "source", "target", "report_path", "pointer_file", "out_dir", "newest_valid_checkpoint",
                         "command_file", "checkpoint"})


def redact_in_line(text: str) -> str:
    """`text` redacted as it stands inside a line, not as a line of its own: a word after it ends a whole-line rule's match
    (pem-body-line), and is taken off again; when a mask swallowed it (`/data/--api-key x`), the text is redacted alone. Never
    less masked than the text alone, but for that rule. Only for an absolute path; any other text is redacted as it is."""
    if not text.startswith("/"):
        return redact(text)
    joined = redact(text + " x")
    return joined.removesuffix(" x") if joined.endswith(" x") else redact(text)


def _redact_path(value: str) -> str:
    new = redact_in_line(value)
    return value if new == value else new
