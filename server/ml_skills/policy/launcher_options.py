"""What a launcher's own options set for the program it starts (`mpirun -x NAME=V`, `srun --export=ALL,NAME=V`,
`--mca NAME V`), and which hosts a recorded line's rendezvous options name.

A restart's question shows the recorded line; a launcher can still set, through its options, the variables a leading
`NAME=value` may not (policy/restart_env.py says which), or send the ranks' traffic to another machine.
"""

from __future__ import annotations

import os
import re

from ml_skills.policy.restart_env import picks_the_program

_ENV_OPTIONS = {"-x", "-genv", "-env", "--env", "--export", "-export"}  # Open MPI, MPICH/Intel MPI hydra, srun
# options that set a launcher's own variable under another spelling: Open MPI's `--mca NAME VALUE` is OMPI_MCA_NAME, srun's
# `--container=PATH` is SLURM_CONTAINER (fortieth round: both were admitted in option form)
# (forty-first round: PRRTE's `--prtemca`, PMIx's `--pmixmca` and pyxis' `--container-image` were admitted: any option
# ending in `mca` is read as its family's variable, and any srun option starting with `--container` as SLURM_CONTAINER)
_MCA_OPTION = re.compile(r"^--?(\w*)mca$")
_MCA_FAMILY = {"": "OMPI", "g": "OMPI", "o": "OMPI", "prte": "PRTE", "pmix": "PMIX"}
# Options that read the launcher's settings, variables or programs from a file the question does not show: srun's
# `--export-file`, Open MPI's `--tune` (`-x NAME=V` lines among MCA parameters), `--am` (MCA parameter files) and `--app` (an
# appfile: the programs to start), hydra's `-configfile` (seventeenth round: only `--export-file` was refused).
_FILE_OPTIONS = {"export-file", "tune", "am", "app", "configfile"}


def launcher_env(opts: list[str]) -> list[str]:
    """Variables srun, mpirun or horovodrun would set, from its options, for the program it starts (`mpirun -x NAME=V`,
    `srun --export=ALL,NAME=V`, `mpirun -genv NAME V`) that choose what runs or loads; an option that reads them from a
    file the question does not show (`--export-file`, `--tune`, `--am`, `--app`, `-configfile`) counts as one. Before the ninth round only a line's leading NAME=V was
    checked: `mpirun -np 1 -x PYTHONPYCACHEPREFIX=.c python train.py` loaded planted bytecode after an accept."""
    bad = sorted({w.split("=", 1)[0] for w in opts if _reads_a_file(w)})
    return sorted(set(bad + [n for n in _names_set(opts) if picks_the_program(n)]))


def _reads_a_file(word: str) -> bool:
    return word.startswith("-") and word.split("=", 1)[0].lstrip("-").replace("_", "-") in _FILE_OPTIONS


def _names_set(opts: list[str]) -> list[str]:
    """The variable names a launcher's options set (`-x NAME=V`, `--export=ALL,NAME=V`, `-genv NAME V`, `--mca NAME V`,
    srun's `--container=PATH`)."""
    names: list[str] = []
    for i, w in enumerate(opts):
        if _reads_a_file(w):
            continue
        if i > 0 and (m := _MCA_OPTION.match(opts[i - 1])):
            names.append(f"{_MCA_FAMILY.get(m.group(1), m.group(1).upper())}_MCA_{w}")
            continue
        if w.startswith("--container"):
            names.append("SLURM_CONTAINER")
            continue
        value = w.split("=", 1)[1] if w.startswith("-") and "=" in w else w
        names += [x.split("=", 1)[0] for x in value.split(",") if "=" in x]
        if i > 0 and opts[i - 1] in _ENV_OPTIONS:
            names.append(w.split("=", 1)[0])
    return names

# torchrun's rendezvous and master host (also deepspeed's and torch.distributed.launch's), given as options: the ranks
# exchange the model's weights and gradients with whatever joins there. Loopback names the machine itself.
_RENDEZVOUS = {"--rdzv_endpoint": 8, "--master_addr": 10, "--main_process_ip": 8}  # accelerate's too; also argparse's unambiguous prefixes (`--rdzv-e`, `--master_a`)
_RENDEZVOUS_ENV = ("MASTER_ADDR", "PET_RDZV_ENDPOINT", "PET_MASTER_ADDR")  # torchrun reads PET_<OPTION> as its option
_LOCAL = re.compile(r"^(?:localhost|127(?:\.\d{1,3}){3}|\[?::1\]?)(?::\d+)?$")

def rendezvous(argv: list[str], env: dict[str, str]) -> list[str]:
    """The rendezvous or master host options of a recorded line (`--rdzv-endpoint evil:29400`, `--master_addr=...`, any
    prefix torchrun's argparse takes for them) and the variables that set them (`MASTER_ADDR`, torchrun's `PET_RDZV_ENDPOINT`),
    when they name another machine (one a launcher's option sets is named whatever it holds): before the seventeenth round the
    question named none."""
    found = [n for n in _RENDEZVOUS_ENV if not _LOCAL.match(env.get(n, "localhost"))]
    found += [n for n in _RENDEZVOUS_ENV if n in set_by_launcher(argv) and n not in found]
    for i, w in enumerate(argv):
        opt, eq, value = w.partition("=")
        name = "--" + opt[2:].replace("-", "_") if opt.startswith("--") else opt
        if not any(len(name) >= least and full.startswith(name) for full, least in _RENDEZVOUS.items()):
            continue
        value = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
        if not _LOCAL.match(value):
            found.append(opt)
    return found


_STARTS_ANY = {"srun", "mpirun", "horovodrun"}
_PYTHON_LAUNCHER = re.compile(r"^(python(\d+(\.\d+)?)?|torchrun|deepspeed|accelerate)$")


def set_by_launcher(argv: list[str]) -> list[str]:
    """Every variable srun, mpirun or horovodrun sets, through its options, for the Python launcher it starts
    (`mpirun -x HTTPS_PROXY=...`, `srun --export=ALL,WANDB_BASE_URL=...`): the question names those that send the run's
    credentials elsewhere, as it names a line's leading ones (sixteenth round: only those were named)."""
    if not argv or os.path.basename(argv[0]) not in _STARTS_ANY:
        return []
    inner = next((i for i, w in enumerate(argv[1:], 1) if _PYTHON_LAUNCHER.match(os.path.basename(w))), len(argv))
    return _names_set(argv[1:inner])


# Each launcher's own options a recorded line may give it before the program it starts (forty-second round: the lists of
# refused options were passed round after round by options they did not name - Open MPI's `--launch-agent` and `--prefix`,
# hydra's `-launcher-exec-args`, horovodrun's `--mpi-args`): an option not
# named here is refused, so a launcher's new or rare option is a refusal ("run it yourself"), never a program started.
# The values are read by the checks above (`-x`, `--export`, `--mca`) and by `restart_command` (a value naming a program).
_MPIRUN_OPTIONS = frozenset({
    "-np", "--np", "-n", "-c", "-N", "-npernode", "--npernode", "-npersocket", "--npersocket", "-ppn", "-pernode", "--pernode",
    "-H", "--host", "-host", "-hosts", "--hostfile", "-hostfile", "-f", "--machinefile", "-machinefile",
    "--bind-to", "-bind-to", "--map-by", "-map-by", "--rank-by", "-rank-by", "--cpus-per-proc", "--cpus-per-rank",
    "-x", "-genv", "-env", "-genvall", "-genvnone", "-genvlist", "-envlist",
    "--allow-run-as-root", "-allow-run-as-root", "--oversubscribe", "-oversubscribe", "--nooversubscribe",
    "--report-bindings", "-report-bindings", "--display-map", "-display-map", "--display-allocation", "--tag-output",
    "-tag-output", "--timestamp-output", "--merge-stderr-to-stdout", "--use-hwthread-cpus", "-q", "--quiet", "-v", "--verbose",
    "-l", "-prepend-rank", "-iface", "-launcher", "-bootstrap",
})
_SRUN_OPTIONS = frozenset({
    "-N", "--nodes", "-n", "--ntasks", "--ntasks-per-node", "--ntasks-per-gpu", "-c", "--cpus-per-task", "--cpus-per-gpu",
    "--gres", "-G", "--gpus", "--gpus-per-node", "--gpus-per-task", "--gpu-bind", "--cpu-bind", "--mem", "--mem-per-cpu",
    "--mem-per-gpu", "-p", "--partition", "-t", "--time", "-J", "--job-name", "-A", "--account", "-q", "--qos", "--mpi",
    "--export", "--exclusive", "-K", "--kill-on-bad-exit", "-l", "--label", "-u", "--unbuffered", "--overlap", "-m",
    "--distribution", "--hint", "--threads-per-core", "-W", "--wait", "-w", "--nodelist", "-x", "--exclude", "-C",
    "--constraint", "--reservation", "--comment", "-o", "--output", "-e", "--error", "--network", "--signal", "--cpu-freq",
    "-O", "--overcommit", "--spread-job", "--open-mode", "-v", "--verbose", "-Q", "--quiet", "-X", "--disable-status",
    "--propagate", "--nice",
})
_HOROVODRUN_OPTIONS = frozenset({
    "-np", "--num-proc", "-H", "--hosts", "-hostfile", "--hostfile", "-p", "--ssh-port", "--gloo", "--mpi",
    "--network-interface", "--network-interfaces", "--verbose", "--start-timeout", "--disable-cache", "--fusion-threshold-mb",
    "--cycle-time-ms", "--cache-capacity", "--hierarchical-allreduce", "--hierarchical-allgather", "--autotune",
    "--timeline-filename", "--timeline-mark-cycles", "--log-level", "--min-np", "--max-np", "--slots-per-host", "--slots",
    "--num-nccl-streams", "--mpi-threads-disable", "--no-stall-check", "--stall-check-warning-time-seconds",
    "--stall-check-shutdown-time-seconds", "--gloo-timeout-seconds", "--prefix-output-with-timestamp",
})
_ALLOWED = {"mpirun": _MPIRUN_OPTIONS, "srun": _SRUN_OPTIONS, "horovodrun": _HOROVODRUN_OPTIONS}
_NEGATIVE = re.compile(r"^-\d")


def unknown_options(launcher: str, opts: list[str]) -> list[str]:
    """The options among `opts` (what a recorded line gives `launcher` before the program it starts) that are not known to
    only place or tune the run: every option of srun, mpirun and horovodrun not named above; an option family
    `--*mca` is known (its variables are checked as the variables they set)."""
    allowed = _ALLOWED.get(launcher)
    if allowed is None:
        return []
    names = {w.split("=", 1)[0] for w in opts if w.startswith("-") and len(w) > 1 and not _NEGATIVE.match(w)}
    return sorted(n for n in names if n not in allowed and not (launcher == "mpirun" and _MCA_OPTION.match(n)))
