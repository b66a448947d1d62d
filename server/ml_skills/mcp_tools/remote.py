"""read_remote_log: a remote training log's tail and its run directory's companion files, thin over collectors/ssh.

ssh settings come from the server's environment, like the CLI's: ML_SKILLS_SSH_CONFIG (an
ssh_config, `ssh -F`) and ML_SKILLS_SSH_DEADLINE (seconds). Host keys are checked strictly and
ssh never prompts, so a host the person has not trusted is refused, never accepted by the model.
"""

from __future__ import annotations

import fnmatch
import os
from typing import Annotated

from pydantic import Field

from ml_skills.collectors import env_seconds, ssh
from ml_skills.mcp_tools.common import READ_ONLY_REMOTE, ToolResult, tool
from ml_skills.models import EvidenceStatus, Model
from ml_skills.safety.quoting import DEFAULT_MAX_CHARS, Fenced, fence, new_marker, quote_inline

COMPANION_CHARS = 8000  # of each companion file: configs and error streams, not whole logs


class CompanionFile(Model):
    name: str = Field(description="File name in the log's directory (train_args.*, config.*, *.err, stderr*, error.json, ...).")
    read: str = Field(description="head (a config: its start is returned) or tail (an error stream: its end is).")
    truncated: bool = Field(False, description="True when only part of the file is returned.")
    text: str = Field(description="The file's text, fenced as quoted data between this call's markers.")


class RemoteLog(ToolResult):
    source: str = Field(description="user@host:/path that was read.")
    host: str = Field(description="The host that answered.")
    path: str = Field(description="The log's absolute path on that host.")
    log_state: str = Field(description="ok, missing, not-regular, unreadable or unknown (the answer was cut off).")
    size_bytes: int | None = Field(None, description="The remote log's whole size; only its tail is fetched.")
    line_count: int = Field(0, description="Lines of the log returned.")
    text: str = Field("", description="The log's last lines, fenced as quoted data between this call's markers.")
    companions: list[CompanionFile] = Field(default_factory=list, description="Companion files found next to the log.")


def _how(name: str) -> str:
    return "tail" if any(fnmatch.fnmatchcase(name, g) for g, how in ssh.COMPANIONS if how == "tail") else "head"


@tool(title="Read a remote log over ssh", annotations=READ_ONLY_REMOTE, deadline=ssh.DEADLINE + 30)
def read_remote_log(
    target: Annotated[str, Field(min_length=3, max_length=4200,
                                 description="user@host:/absolute/path/to/train.log (the host must already be in known_hosts).")],
    lines: Annotated[int, Field(ge=1, le=ssh.TAIL_LINES, description="How many of the log's last lines to return.")] = 200,
    max_chars: Annotated[int, Field(ge=1000, le=200_000, description="Cap on the returned log text; the newest lines are kept.")] = DEFAULT_MAX_CHARS,
) -> RemoteLog:
    """Fetch the last lines of a training log on another machine over ssh, plus the configs and
    error streams next to it (train_args.*, config.*, deepspeed_config.*, stderr, torchelastic
    error files), in one read-only ssh call that never prompts. Call it when the run's log is on a
    remote host; then `diagnose` with the same target runs the whole engine on it."""
    deadline = min(env_seconds("ML_SKILLS_SSH_DEADLINE", ssh.DEADLINE), ssh.DEADLINE)  # inside the tool's own deadline
    remote, got, problems = ssh.fetch(target, lines=lines, deadline=deadline, config=os.environ.get("ML_SKILLS_SSH_CONFIG") or None)
    marker = new_marker()
    log_lines = got.log.splitlines()[-lines:] if got.log is not None else []
    f = fence(log_lines, marker=marker, max_chars=max_chars, label=str(remote))
    truncated = f.truncated or (got.size is not None and got.log is not None and got.size > len(got.log.encode()))
    redactions, stripped = f.redactions, f.stripped
    companions = []
    for name in sorted(got.companions):
        how = _how(name)
        body = got.companions[name].splitlines()
        cf = fence(body, marker=marker, max_chars=COMPANION_CHARS, label=f"{remote.host}:{name}")
        cut = cf.truncated or len(got.companions[name].encode()) >= ssh.COMPANION_BYTES
        if how == "head" and cf.truncated:  # a config's start matters: keep the first lines instead
            cf = _head(body, marker, f"{remote.host}:{name}")
        redactions += cf.redactions
        stripped += cf.stripped
        companions.append(CompanionFile(name=name, read=how, truncated=cut, text=cf.text))
    status = EvidenceStatus.PARTIAL if problems else EvidenceStatus.OK if log_lines else EvidenceStatus.NO_DATA
    # a problem can quote the remote command's stderr (the host's shell start-up files print there): marked as quoted data
    # like the MLflow server's error text in the source tools (sixteenth round, by reading)
    return RemoteLog(status=status, truncated=truncated, redactions=redactions, stripped_chars=stripped, marker=marker,
                     notes=[quote_inline(p, marker) for p in problems], source=str(remote), host=remote.host, path=remote.path, log_state=got.log_state,
                     size_bytes=got.size, line_count=f.lines, text=f.text, companions=companions)


def _head(lines: list[str], marker: str, label: str) -> Fenced:
    """Fence the first lines that fit (fence keeps the newest; a config wants its start)."""
    kept: list[str] = []
    size = 0
    for line in lines:
        size += len(line) + 1
        if size > COMPANION_CHARS:
            break
        kept.append(line)
    f = fence(kept, marker=marker, max_chars=COMPANION_CHARS, label=label)
    f.truncated = True
    return f


TOOLS = [read_remote_log]
