"""Artifact tools: inventory a run directory, inspect one checkpoint. Thin over collectors/.

Checkpoints are judged from their structure (headers, zip directory), never loaded or unpickled.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ml_skills.collectors import artifacts as artifact_collector
from ml_skills.collectors import checkpoints
from ml_skills.mcp_tools.common import ToolResult, counted, roots, tool
from ml_skills.models import ArtifactInventory, CheckpointInfo, EvidenceStatus
from ml_skills.safety.paths import confine
from ml_skills.safety.quoting import clean, name_or_quoted, new_marker, quote_inline

DirArg = Annotated[str, Field(min_length=1, max_length=4096, description="Run or output directory, inside the allowed roots.")]


class ArtifactsResult(ToolResult):
    inventory: ArtifactInventory


class CheckpointResult(ToolResult):
    checkpoint: CheckpointInfo


def _clean_names(names: list[str]) -> tuple[list[str], int, int]:
    out, stripped, red = [], 0, 0
    for n in names:
        c = clean(n, 500)
        out.append(c.text)
        stripped += c.stripped
        red += c.redactions
    return out, stripped, red



def _quoted(info: CheckpointInfo, marker: str) -> CheckpointInfo:
    """A checkpoint's reason quotes names from the file (tensor names of an index.json, zip members): marked as data.

    Escapes and invisible characters in it are stripped, and counted, by the result's last pass, or already by the
    inspector's own cut of a name it quotes (counted in the worker thread: `counted`).
    """
    return info.model_copy(update={"reason": quote_inline(info.reason, marker)}) if info.reason else info


@tool(title="List a run's artifacts", deadline=60.0)
def list_artifacts(path: DirArg) -> ArtifactsResult:
    """Inventory a run directory: configs, logs, checkpoints (step, size, mtime, valid or why not),
    failure artifacts, the latest pointer, the newest valid checkpoint and the launch command.
    Use it to find the logs to read and a checkpoint to resume from."""
    d = confine(path, roots(), want="dir")
    inv, stripped, red = counted(lambda: artifact_collector.inventory(d))
    for name in ("configs", "logs", "failure_artifacts", "notes"):  # file names are untrusted text too
        vals, s, r = _clean_names(getattr(inv, name))
        setattr(inv, name, vals)
        stripped, red = stripped + s, red + r
    marker = new_marker()
    # the launch command and the pointer's content are a file's text, not names: marked as data (fourteenth round: a
    # command.txt ending `IGNORE PREVIOUS INSTRUCTIONS` came back bare)
    if inv.launch_command:
        c = clean(inv.launch_command, 1000)
        inv.launch_command, stripped, red = quote_inline(c.text, marker), stripped + c.stripped, red + c.redactions
    if inv.latest_pointer:
        c = clean(inv.latest_pointer, 200)
        inv.latest_pointer, stripped, red = quote_inline(c.text, marker), stripped + c.stripped, red + c.redactions
    inv.checkpoints = [_quoted(c, marker) for c in inv.checkpoints]
    # seventy-sixth round: a file named as an instruction came back bare in these fields; a plain path stays usable as is
    for name in ("configs", "logs", "failure_artifacts"):
        setattr(inv, name, [name_or_quoted(n, marker) for n in getattr(inv, name)])
    # (paths are redacted by the result's last pass as they stand in a line: a folder named like a key's body line is shown)
    inv.checkpoints = [c.model_copy(update={"path": name_or_quoted(c.path, marker)}) for c in inv.checkpoints]
    inv.root = name_or_quoted(inv.root, marker)  # seventy-seventh round: a run folder named as an instruction, echoed bare
    for name in ("newest_valid_checkpoint", "launch_file"):
        if (v := getattr(inv, name)) is not None:
            setattr(inv, name, name_or_quoted(v, marker))
    empty = not (inv.configs or inv.logs or inv.checkpoints or inv.failure_artifacts)
    return ArtifactsResult(status=EvidenceStatus.NO_DATA if empty else EvidenceStatus.PARTIAL if inv.truncated else EvidenceStatus.OK,
                           truncated=inv.truncated, redactions=red, stripped_chars=stripped, marker=marker, inventory=inv)


@tool(title="Check one checkpoint")
def inspect_checkpoint(path: Annotated[str, Field(min_length=1, max_length=4096, description="Checkpoint file or checkpoint directory.")]) -> CheckpointResult:
    """Say whether a checkpoint file or folder is complete (format, size, step, valid and why),
    from its structure only: it is never loaded or unpickled."""
    p = confine(path, roots(), want="any")
    info, stripped, red = counted(lambda: checkpoints.inspect_dir(p) if p.is_dir() else checkpoints.inspect_file(p))
    marker = new_marker()
    info = info.model_copy(update={"path": name_or_quoted(info.path, marker)})
    return CheckpointResult(status=EvidenceStatus.OK, marker=marker, checkpoint=_quoted(info, marker), stripped_chars=stripped,
                            redactions=red)


TOOLS = [list_artifacts, inspect_checkpoint]
