"""--plot for triage-runs: when each group's runs ended (their newest log's mtime), one row per group.

A failure that started on Tuesday and a failure that stopped after a fix read at a glance. matplotlib
is imported here only (the `plot` extra), Agg backend, no display needed.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ml_skills.errors import InputError
from ml_skills.grid.models import Outcome, TriageReport
from ml_skills.render.json_report import write_bytes
from ml_skills.safety.paths import make_dirs

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

FILENAME = "triage-runs.png"
MAX_ROWS = 12
FAILED_COLOURS = ("tab:red", "tab:orange", "tab:purple", "tab:blue", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")  # not green/gray


# text in a figure is data (a file name, a run name): never parsed as $mathtext$ or handed to LaTeX,
# where `run$\foo{x}$.log` raised ParseFatalException and turned the whole diagnosis into 'internal error'
PLAIN_TEXT: dict[RcKeyType, Any] = {"text.parse_math": False, "text.usetex": False}


def write(r: TriageReport, out_dir: str | os.PathLike[str]) -> Path:
    try:
        import matplotlib
    except ImportError:
        raise InputError("--plot needs matplotlib: pip install 'ml-skills[plot]'") from None
    with matplotlib.rc_context(PLAIN_TEXT):
        return _write(r, out_dir)


def _write(r: TriageReport, out_dir: str | os.PathLike[str]) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plot needs matplotlib: pip install 'ml-skills[plot]'") from None
    rows = r.groups[:MAX_ROWS]
    when = {run.name: run.mtime for run in r.runs}
    out = Path(out_dir)
    make_dirs(out)
    fig, ax = plt.subplots(figsize=(10, 0.45 * max(3, len(rows)) + 1.2))
    labels = []
    for y, g in enumerate(reversed(rows)):
        xs = [t for name in g.runs if (t := when.get(name)) is not None]
        i = len(rows) - 1 - y
        colour = ("tab:green" if g.outcome is Outcome.COMPLETED else "tab:gray" if g.outcome is not Outcome.FAILED
                  else FAILED_COLOURS[i % len(FAILED_COLOURS)])
        # matplotlib's stubs say ArrayLike; datetimes are plotted through its date unit converter
        ax.scatter(xs, [y] * len(xs), s=18, alpha=0.7, color=colour)  # type: ignore[arg-type]
        what = f"{g.failure_class.value if g.failure_class else '?'} {g.fingerprint}" if g.outcome is Outcome.FAILED else g.outcome.value
        labels.append(f"{what} ({g.count})")
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel("newest log written")
    ax.set_title(f"triage-runs: {r.runs_total} runs, {r.counts.get('failed', 0)} failed", fontsize=11)
    ax.grid(axis="x", alpha=0.3)
    fig.autofmt_xdate()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, dpi=110, format="png")
    plt.close(fig)
    return write_bytes(buf.getvalue(), out, FILENAME)  # renamed into place: never written through a link planted at the name
