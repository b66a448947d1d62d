"""The secret shapes redact.py masks: one rule per kind, its needles (a cheap substring test that must pass before the
rule runs) and its pattern, whose group `s` is the secret.

Why its own module: the table is most of the redactor's text and each entry answers one round's attack; redact.py is the
machinery that runs it (readings, passes, the fill, the per-line judgement)."""

from __future__ import annotations

import re

from ml_skills.lazyre import lazy

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
KEYWORD = (
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
RANK_PREFIX = r"(?:\[[\w,.:\-]{1,40}\](?:<std(?:out|err)>)?:?[ \t]{0,4})?"

# A W&B key of 40 hex digits, and the same behind the prefix of a self-hosted server's keys (`local-`, a VM's `vm-`): twenty-first
# round, `wandb login local-<40 hex>` (the key W&B Server hands out) was kept in clear.
_WANDB_KEY = r"(?:(?:local|vm)-)?[0-9a-f]{40}"

# The number grep_log (`9: `) and an excerpt (` 10 | `, `>15 | `) put before each line they show: never a value on the
# line below a flag.
_LINE_NUMBER = r"[ \t]{0,12}>?\d{1,12}[ \t]{0,4}[:|](?:[ \t]|$)"

# Each rule also names lowercase needles, one of which must be in the text for the rule to run: a cheap
# `in` test that skips most rules on ordinary log lines.
RULES: list[tuple[str, tuple[str, ...], re.Pattern[str]]] = [
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
        r"(?m)^[\s'\">]{0,8}" + RANK_PREFIX + r"(?:\d{1,12}\s{0,4}[:|]\s{0,4})?(?P<s>(?=[A-Za-z0-9+/]{0,76}[A-Z])(?=[A-Za-z0-9+/]{0,76}[a-z])"
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
        r"(?im)^[^\n]{0,500}?" + _START + r"['\"]?(?:--?)?[a-z0-9_.\-]{0,40}" + KEYWORD + r"['\"]?(?:[ \t]{1,3}+\\|[ \t]{0,3}+[:=][ \t]{0,3}+(?:\\|[|>][+\-]?[0-9]?))"
        r"[ \t]{0,3}+\r?\n(?:" + _LINE_NUMBER + r")?[ \t]{0,40}+['\"]?(?P<s>(?![$<\[%\\]|--?[a-z])[^\s'\"]{4,1000})")),
    # ... and a variable printed as `NAME VALUE` on a line of its own (`for k, v in os.environ.items(): print(k, v)`): an upper
    # case name holding a keyword, one space or tab, one word (fifty-third round: AWS_SECRET_ACCESS_KEY and DB_PASSWORD kept).
    ("env-name-space-value", _KEY_NEEDLES + ("pass", "pwd"), lazy(
        r"(?m)^[\s'\">]{0,8}" + RANK_PREFIX + r"(?:\d{1,12}\s{0,4}[:|]\s{0,4})?[A-Z0-9_]{0,60}(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|PASS|PWD)"
        r"(?:_?[0-9]{1,3}|_(?:BASE|PROD|PRODUCTION|DEV|STAGING|STAGE|TEST|PRIMARY|SECONDARY|BACKUP|OLD|NEW|MAIN|RO|RW|READ|WRITE|ADMIN|ROOT|V[0-9]{1,2}))?"
        r"[ \t]{1,3}+(?P<s>(?![$<\[%]|(?i:true|false|none|null|set|unset|missing|not)\b|[0-9.]{1,30}[ \t]*$)[^\s'\"]{4,1000})[ \t]*\r?$")),
    # --api-key X, --hf_token=X, --aws-secret-access-key 'X', and argv printed as a list: '--token', 'X'.
    # Thirtieth round: the same list pretty-printed, one element a line (W&B's wandb-metadata.json `"args"`, written with
    # indent=4: `"--hf_token",` over `"X",`): a quoted flag ending its line with `,`, and the quoted value starting the
    # next, behind its indentation and a line number as grep and an excerpt print it (`9: `, ` 10 | `). Before, no rule
    # took the value, and the whole-text pass masked grep's `9:` prefix as the flag's value: a value on the next line never
    # starts with one (_LINE_NUMBER), and a next element that is itself a flag (`"--use_auth_token",` over `"--output_dir",`) is none.
    ("cli-secret-flag", _KEY_NEEDLES, lazy(
        r"(?i)" + _START + r"--?[a-z0-9_.\-]{0,40}" + KEYWORD + r"(?:['\"]?(?:\s{1,3}|=|,\s{0,2}|" + _PCT + r"3[Dd]|" + _PCT + r"20|\+)['\"]?"
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
        r"(?i)" + _START + r"['\"]?(?:name|key)['\"]?\s{0,3}[:=]\s{0,3}['\"]?[a-z0-9_.\-/]{0,200}" + KEYWORD
        + r"['\"]?(?:[\s,]{1,40}+['\"]?[a-z_]{1,40}+['\"]?\s{0,3}+[:=]\s{0,3}+(?:\"[^\"\n]{0,200}+\"|'[^'\n]{0,200}+'|[^\s'\",{}\[\]]{0,200}+)){0,6}"
        r"[\s,]{1,40}['\"]?value['\"]?\s{0,3}[:=]\s{0,3}['\"]?(?![<\[]|[0-9.]{1,30}(?![^\s'\",}&\])]))(?P<s>[^\s'\",}&\])]{4,1000})")),
    # ... and a secret-bearing name whose value is an object holding it: W&B's config as JSON ({"db_password": {"desc":
    # null, "value": "X"}}), a Vertex AI pipeline's runtime parameters ({"hf_token": {"stringValue": "X"}}).
    ("nested-value", ("value",), lazy(
        r"(?i)" + _START + r"['\"]?[a-z0-9_.\-]{0,40}" + KEYWORD + r"['\"]?\s{0,3}:\s{0,3}\{[^{}]{0,200}?['\"]?(?:value|stringValue|string_value)"
        r"['\"]?\s{0,3}:\s{0,3}['\"]?(?![<\[]|[0-9.]{1,30}(?![^\s'\",}&\])]))(?P<s>[^\s'\",}&\])]{4,1000})")),
    ("wandb-config-yaml", ("desc:",), lazy(
        r"(?im)^[ \t]{0,40}[a-z0-9_.\-]{0,40}" + KEYWORD + r":[ \t]{0,3}\r?\n[ \t]{1,40}desc:[^\n]{0,400}\n[ \t]{1,40}value:[ \t]{0,3}"
        r"['\"]?(?![<\[]|[0-9.]{1,30}(?![^\s'\",}&\])]))(?P<s>[^\s'\",}&\])]{4,1000})")),
    # An XML element named for a secret (Maven's settings.xml `<password>X</password>`, `<hub_token>X</hub_token>`), printed
    # by a CI step: kept in clear before the fourteenth round. The value is what stands between the tags.
    # Fifteenth round: the element may carry attributes (`<password type="text">`, `<ns:password xmlns:ns="...">`) and its
    # value sit in a CDATA section (`<password><![CDATA[X]]></password>`), and an element may be named for a secret by its
    # `name` or `key` attribute (`<entry key="password">X</entry>` in Java's XML properties, `<string name="api_key">`
    # in an Android resource, `<param name="hub_token">`): each was kept in clear.
    ("xml-secret-element", ("</",), lazy(
        r"(?i)<[a-z0-9_.:\-]{0,40}(?:" + KEYWORD + r"(?:\s[^<>]{0,200})?|\s[^<>]{0,200}?(?<![a-z0-9_\-])(?:name|key)\s{0,3}=\s{0,3}['\"]"
        r"[a-z0-9_.\-]{0,40}" + KEYWORD + r"['\"][^<>]{0,200})>\s{0,3}(?:<!\[CDATA\[\s{0,3})?(?![0-9.]{1,30}\s{0,3}(?:\]\]>)?<)"
        r"(?P<s>(?:(?!\]\]>)[^<>\s]){4,1000})\s{0,3}(?:\]\]>)?\s{0,3}</")),
    # Sixteenth round (each listed as kept by the fifteenth): a property list's `<key>api_key</key><string>X</string>` (the
    # value in the next element), the XML element written with HTML entities (`&lt;password&gt;X&lt;/password&gt;`, a log
    # page's escaped text), and an element whose closing tag is not on its line (`<password>X` at the line's end, the value
    # right after the tag).
    ("plist-secret", ("<key>",), lazy(
        r"(?i)<key>\s{0,3}[a-z0-9_.\-]{0,40}" + KEYWORD + r"\s{0,3}</key>\s{0,40}<string>\s{0,3}(?P<s>[^<>\s]{4,1000})\s{0,3}</string>")),
    ("xml-secret-entity", ("&lt;/",), lazy(
        r"(?i)&lt;[a-z0-9_.:\-]{0,40}" + KEYWORD + r"(?:\s[^&<>]{0,200})?&gt;\s{0,3}(?P<s>(?:(?!&lt;)[^<>\s]){4,1000}?)\s{0,3}&lt;/")),
    ("xml-secret-unclosed", _KEY_NEEDLES, lazy(
        r"(?im)<[a-z0-9_.:\-]{0,40}" + KEYWORD + r">(?P<s>[^<>\s]{4,1000})[ \t]{0,3}$")),
    # Eighteenth round (each listed as kept since the thirteenth to fifteenth rounds): a secret-bearing name and its value as
    # two strings of a call or a tuple (`os.environ.setdefault("HF_TOKEN", "X")`, `os.putenv(...)`, `getenv("API_KEY", "X")`,
    # PowerShell's `SetEnvironmentVariable('HF_TOKEN', 'X')`, `('api_key', 'X')`: a traceback prints the source line), the
    # value of an element named for a secret given in its `value` attribute (`<secret_key value="X"/>`), and a variable set
    # with no `=` by csh's `setenv`, fish's `set -gx` or a Dockerfile's `ENV NAME X` (a build log prints each step), and
    # Windows' `setx NAME X` (twenty-second round).
    ("keyword-tuple", _KEY_NEEDLES, lazy(
        # not JSON's '"pattern":"api-key","total_matches":1' (a value after a colon, then the next key): no tuple
        r"(?i)(?<![A-Za-z0-9_\-])(?<!:)(?<!: )['\"][a-z0-9_.\-]{0,40}" + KEYWORD + r"['\"][ \t]{0,3}+,[ \t]{0,3}+(?:[rbuf]{1,2}+)?['\"]"
        r"(?![<\[]|(?:none|null|true|false|[0-9.]{1,30}+)['\"])(?P<s>[^'\"\n]{4,1000}+)(?=['\"](?![ \t]{0,3}+:))")),
    ("xml-secret-value", ("value",), lazy(
        r"(?i)<[a-z0-9_.:\-]{0,40}" + KEYWORD + r"\s[^<>]{0,200}?(?<![a-z0-9_\-])value\s{0,3}+=\s{0,3}+['\"]"
        r"(?![0-9.]{1,30}+['\"])(?P<s>[^'\"<>\n]{4,1000}+)['\"]")),
    ("shell-set-secret", ("setenv", "set -", "env ", "setx"), lazy(
        r"(?i)(?<![A-Za-z0-9_\-])(?:setenv|setx|set[ \t]{1,3}+-[a-z]{1,4}+|env)[ \t]{1,3}+[a-z0-9_]{0,40}" + KEYWORD
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
        r"(?i)" + _START + r"[a-z0-9_.\-]{0,40}" + KEYWORD + _ASSIGN + r"(?![<\[]|[0-9.]{1,30}(?![^\s'\",}&\])])|desc:)"
        r"(?![a-z0-9_.\-]{0,40}" + KEYWORD + r"\s{0,3}+[ \t]{0,40}+(?:::?=|[:=]|=>|->))(?P<s>" + _quoted(4) + r"[^\s'\",}&\])]{4,1000})")),
]
