"""--plot: a PNG of the metric trajectory with the anomalies and the failure point marked.

matplotlib is imported here only (the `plot` extra), with the Agg backend so no display is
needed. One panel per metric family that the run logged.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ml_skills.errors import InputError
from ml_skills.models import Diagnosis
from ml_skills.render.json_report import write_bytes
from ml_skills.safety.paths import make_dirs

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

FILENAME = "check-failed-run.png"
PANELS = [("loss", ("loss", "val_loss")), ("grad norm", ("grad_norm",)), ("learning rate", ("lr",)),
          ("throughput", ("throughput",)), ("accuracy", ("acc", "val_acc")), ("memory", ("mem",))]


# text in a figure is data (a file name, a run name): never parsed as $mathtext$ or handed to LaTeX,
# where `run$\foo{x}$.log` raised ParseFatalException and turned the whole diagnosis into 'internal error'
PLAIN_TEXT: dict[RcKeyType, Any] = {"text.parse_math": False, "text.usetex": False}


def write(d: Diagnosis, out_dir: str | os.PathLike[str]) -> Path:
    try:
        import matplotlib
    except ImportError:
        raise InputError("--plot needs matplotlib: pip install 'ml-skills[plot]'") from None
    with matplotlib.rc_context(PLAIN_TEXT):
        return _write(d, out_dir)


def _write(d: Diagnosis, out_dir: str | os.PathLike[str]) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plot needs matplotlib: pip install 'ml-skills[plot]'") from None
    by_name = {s.name: s for s in d.trajectory}
    panels = [(title, [by_name[n] for n in names if n in by_name]) for title, names in PANELS]
    panels = [(t, ss) for t, ss in panels if ss]
    out = Path(out_dir)
    make_dirs(out)
    n = max(1, len(panels))
    fig, axes = plt.subplots(n, 1, figsize=(9, 2.4 * n + 0.8), sharex=True, squeeze=False)
    title = f"{d.primary_cause.value if d.primary_cause else 'undetermined'} ({d.run_status.value}) - {Path(d.target).name}"
    fig.suptitle(title, fontsize=11)
    fail_x = d.last_progress.step if d.last_progress and d.last_progress.step is not None else None
    if not panels:
        axes[0][0].text(0.5, 0.5, "no metric series in the evidence", ha="center", va="center")
    for ax, (label, series) in zip((a[0] for a in axes), panels):
        for s in series:
            xs = [x for x, v in s.points if v is not None]
            ys = [v for _, v in s.points if v is not None]
            ax.plot(xs, ys, label=s.name, linewidth=1.2)
            bad = [x for x, v in s.points if v is None]
            if bad:
                ax.scatter(bad, [ys[-1] if ys else 0] * len(bad), marker="x", color="red", label=f"{s.name} NaN/Inf", zorder=3)
        if label in ("loss", "grad norm") and any(v and v > 0 for s in series for _, v in s.points):
            ax.set_yscale("log")
        ax.set_ylabel(label)
        ax.legend(loc="upper left", fontsize=8)
        for a in d.anomalies:
            if a.step is not None:
                ax.axvline(a.step, color="orange", linestyle="--", linewidth=1)
        if fail_x is not None:
            ax.axvline(fail_x, color="red", linewidth=1.2)
    axes[-1][0].set_xlabel("step")
    if d.anomalies:
        fig.text(0.01, 0.005, "dashed: " + "; ".join(a.kind.value for a in d.anomalies[:4]) + "   red: last progress / failure", fontsize=8)
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))
    buf = io.BytesIO()
    fig.savefig(buf, dpi=90, format="png")
    plt.close(fig)
    return write_bytes(buf.getvalue(), out, FILENAME)  # renamed into place: never written through a link planted at the name
