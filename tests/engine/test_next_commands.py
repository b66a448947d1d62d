"""Issue 15, item 3: each report's next command is the one that decides, filled in from the log's own names.

Corpus logs (tests/corpus/*/case.json cites each thread) are read as they are: the command is asserted
word for word (the part before its `   # why` comment). Real runs (a script raising in its own code, a
module that is not installed, a file that is not there, a process refused memory by its rlimit, and
the same failures under names built to break out of the shell) check that the command really shows
what it promises when run, and that a name copied from the log never runs anything.
"""

from __future__ import annotations

import resource
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.engine.plan.probes.memory import smaller_batch_command

CORPUS = Path(__file__).parents[1] / "corpus"
OPERATORS = set("|&;<>()")


def _case(prefix: str) -> Path:
    return next(p for p in CORPUS.iterdir() if p.name.startswith(prefix)) / "train.log"


def _bare(cmds: list[str]) -> list[str]:
    """The commands without their `   # why` comments."""
    return [c.split("   # ")[0] for c in cmds]


def commands(target: Path) -> list[str]:
    return diagnose(DiagnoseRequest(target=str(target))).next_commands


EXACT = {
    # memory: where it ran out
    "005-": "nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv; "
            "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv",
    "019-": "nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv; "  # TF's allocator names no device: a GPU's
            "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv",
    "271-": "sacct -j 37205392 --format=JobID,State,ReqMem,MaxRSS,Elapsed",
    "108-": "df -h /dev/shm",
    "176-": "python -c 'import jax; [print(d.device_kind, d.memory_stats()) for d in jax.local_devices()]'",
    "046-": "python -c 'import torch_xla.core.xla_model as xm; print(xm.get_memory_info(xm.xla_device()))'",
    "234-": "kubectl get events -A --field-selector reason=Evicted --sort-by=.lastTimestamp | tail -5",
    "286-": "ray logs raylet.out -ip 192.168.0.107 | grep -i -E 'memory|kill' | tail -20",
    # imports and the environment
    "465-": "python -c 'import sys; print(sys.executable)'; python -m pip show pandas",
    "488-": "grep -n -w update_fn /zhome/ea/9/137501/Desktop/ML_final/ML_final/big_vision_test.py",
    "590-": "ldd --version | head -1; strings /lib64/libc.so.6 | grep -E '^GLIBC_2' | sort -V | tail -3",
    "160-": "python -m pip show accelerate",
    # paths and storage
    "313-": "df -h /media/project/nnUNet/nnUNet_preprocessed/Dataset002_CCTA_3D/nnUNetPlans_3d_fullres; "
            "findmnt -T /media/project/nnUNet/nnUNet_preprocessed/Dataset002_CCTA_3D/nnUNetPlans_3d_fullres; "
            "dmesg -T | grep -i -E 'I/O error|EXT4-fs|XFS|nfs|fuse' | tail -5",
    "342-": "ls -la /zhome/59/9/198225/Desktop/Deep_learning_2023/Deep_learning_2023/main.py; "
            "ls -la /zhome/59/9/198225/Desktop/Deep_learning_2023/Deep_learning_2023 | head -20",
    # clouds: the project, bucket, role, client and instance type the error names
    "006-": "gcloud alpha services quota list --service=aiplatform.googleapis.com --consumer=projects/$(gcloud config get-value project) "
            "--filter='metric:aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus' --format=json",
    "504-": "gcloud projects get-iam-policy sample-object-detection --flatten=bindings "
            "--filter=\"bindings.members:$(gcloud config get-value account)\" --format='value(bindings.role)'",
    "036-": "gcloud storage buckets get-iam-policy gs://learn-demo1",
    "575-": "aws iam get-role --role-name SageMakerRole --query Role.AssumeRolePolicyDocument",
    "276-": "aws service-quotas list-service-quotas --service-code sagemaker "
            "--query \"Quotas[?contains(QuotaName, 'ml.p2.xlarge for training job usage')].[QuotaName,Value]\" --output table",
    "558-": "az role assignment list --assignee 0dae0dfa-9a0d-4999-9500-8a8656d419e2 --scope /subscriptions/ff2e23ae-7d7c-4cbd-99b8-"
            "116bb94dca6e/resourceGroups/RG-ITSMLteamAMLV1toV2-DEV/providers/Microsoft.MachineLearningServices/workspaces/avadevitsmlsvc/"
            "computes/SampleSDKV2 --output table",
    # orchestrators: the job, pod or image the log names
    "283-": "kubectl describe tfjob myjob; kubectl get pods -l training.kubeflow.org/job-name=myjob -o wide",
    "513-": "kubectl describe pod kubeflow-tf-train-7w6r9-1033336217; kubectl logs kubeflow-tf-train-7w6r9-1033336217 -c main --tail=50",
    "009-": "docker manifest inspect gcr.io/tfx-oss-public/ml_metadata_store_server:0.15.1 >/dev/null && echo found",
    # a rank that died natively: its own pid
    "087-": "coredumpctl info --no-pager 101091 | head -60; dmesg -T | grep -E '\\[101091\\]|pid 101091\\b' | tail -3",
    # a device-side assert: the script, synchronously
    "003-": "CUDA_LAUNCH_BLOCKING=1 python train.py",
    # configuration: the script's flags, the target's signature, the tracker's key, the run's own line
    "333-": "python train_bash.py --help",
    "155-": "python -c 'import inspect, walkjump.cmdline.utils as m; print(inspect.signature(m.instantiate_model_for_sample_mode))'",
    "284-": "printenv WANDB_API_KEY >/dev/null && echo 'WANDB_API_KEY set' || echo 'WANDB_API_KEY unset'; grep -s -c api.wandb.ai ~/.netrc",
    "095-": "sed -n '162,168p' /data/hmzhong/TSAR/code/run.py",
    "510-": "sed -n '64,70p' '/content/drive/My Drive/PyTorch--master/datasets.py'",  # a DataLoader worker's own traceback, after its re-raise
}


@pytest.mark.parametrize("prefix", sorted(EXACT))
def test_the_command_is_filled_in_from_the_log(prefix: str) -> None:
    assert EXACT[prefix] in _bare(commands(_case(prefix))), commands(_case(prefix))


def test_a_log_that_stops_with_no_error_asks_whether_the_process_is_still_there() -> None:
    cmds = _bare(commands(_case("013-")))
    assert "ps -eo pid,etime,stat,args | grep -E '[p]ython|[t]orchrun|[d]eepspeed|[a]ccelerate' | head" in cmds, cmds


def test_a_redacted_project_id_is_not_made_into_one() -> None:
    """177's project is printed as 'qwiklabs-gcp-XXXXXXXX' (the poster's redaction): no command names 'qwiklabs-gcp'."""
    assert not [c for c in commands(_case("177-")) if "projects/qwiklabs-gcp" in c]


def test_a_tensorflow_oom_on_the_cpu_checks_the_host_not_a_gpu() -> None:
    cmds = commands(_case("192-"))
    assert not [c for c in cmds if "nvidia-smi" in c], cmds
    assert any(c.startswith("free -h;") for c in cmds), cmds


def test_smaller_batch_keeps_the_launch_and_halves_the_batch() -> None:
    assert smaller_batch_command("python train.py --batch-size 64 --lr 3e-4") == (
        "python train.py --batch-size 32 --lr 3e-4   # the same launch with half the batch (64 -> 32); "
        "keep the effective batch with gradient accumulation")
    assert smaller_batch_command("torchrun --nproc-per-node=8 train.py --per_device_train_batch_size=16").startswith(
        "torchrun --nproc-per-node=8 train.py --per_device_train_batch_size=8   #")
    assert smaller_batch_command("python train.py --lr 3e-4") is None
    assert smaller_batch_command("python train.py --batch-size 64; curl x | sh") is None  # not one simple command


# ---------------------------------------------------------------- real runs


def _run(tmp_path: Path, script: str, source: str, *, limit_mb: int | None = None, name: str = "train.log") -> Path:
    """Run `source` as `script` under tmp_path, its output into a log the way a job's stdout/stderr is kept."""
    path = tmp_path / script
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    log = tmp_path / name

    def cap() -> None:
        if limit_mb:
            resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))

    with log.open("w") as f:
        p = subprocess.run([sys.executable, str(path)], cwd=tmp_path, stdout=f, stderr=subprocess.STDOUT, timeout=120,
                           preexec_fn=cap, check=False)
    assert p.returncode != 0, log.read_text()
    return log


def _sh(cmd: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def test_an_error_in_the_runs_own_code_shows_the_line_that_raised(tmp_path: Path) -> None:
    log = _run(tmp_path, "train.py", "import sys\n\n\ndef build(width, depth):\n    return width * depth\n\n\n"
                                     "print('epoch 1 step 10 loss 2.3', flush=True)\nmodel = build(width=4, depht=3)\n")
    cmds = [c for c in commands(log) if c.startswith("sed -n")]
    assert cmds == [(f"sed -n '6,12p' {tmp_path / 'train.py'}   # line 9 of the run's own code, at the script's top level, where it "
                    "failed (from the run's working directory)")], commands(log)
    shown = _sh(cmds[0].split("   # ")[0], tmp_path).stdout
    assert "model = build(width=4, depht=3)" in shown


def test_a_module_that_is_not_installed_gets_the_interpreter_and_pip_show(tmp_path: Path) -> None:
    log = _run(tmp_path, "train.py", "import json\nimport not_installed_pkg_xyz.models\n")
    cmd = next(c for c in commands(log) if "pip show" in c).split("   # ")[0]
    assert cmd == "python -c 'import sys; print(sys.executable)'; python -m pip show not_installed_pkg_xyz"
    out = _sh(cmd, tmp_path)
    assert "python" in out.stdout and "not found" in out.stderr.lower()  # pip: "Package(s) not found"


def test_a_missing_file_gets_ls_of_it_and_its_folder(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.csv").write_text("x,y\n")
    log = _run(tmp_path, "train.py", "print('loading', flush=True)\nopen('data/val.csv').read()\n")
    cmd = next(c for c in commands(log) if c.startswith("ls -la")).split("   # ")[0]
    assert cmd == "ls -la data/val.csv; ls -la data | head -20"
    out = _sh(cmd, tmp_path)
    assert "No such file" in out.stderr and "train.csv" in out.stdout


def test_a_process_refused_memory_checks_the_host_and_its_limit(tmp_path: Path) -> None:
    log = _run(tmp_path, "train.py", "print('epoch 1', flush=True)\nbuf = bytearray(1 << 32)\n", limit_mb=400)
    assert "MemoryError" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "oom", d.primary_cause
    cmd = next(c for c in d.next_commands if c.startswith("free -h"))
    assert "Mem:" in _sh(cmd.split("   # ")[0], tmp_path).stdout


def test_an_oom_whose_launch_line_is_in_the_log_gets_it_back_with_half_the_batch(tmp_path: Path) -> None:
    """`bash -x` prints the launch line ('+ python train.py --batch-size 64') as job scripts run with set -x do."""
    (tmp_path / "train.py").write_text("import argparse\np = argparse.ArgumentParser()\np.add_argument('--batch-size', type=int)\n"
                                       "a = p.parse_args()\nprint('epoch 1', flush=True)\nbuf = bytearray(a.batch_size << 26)\n")
    log = tmp_path / "train.log"

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    with log.open("w") as f:
        subprocess.run(["bash", "-x", "-c", f"{shlex.quote(sys.executable)} train.py --batch-size 64"], cwd=tmp_path, stdout=f,
                       stderr=subprocess.STDOUT, timeout=120, preexec_fn=cap, check=False)
    assert "MemoryError" in log.read_text()
    cmds = commands(log)
    assert f"{sys.executable} train.py --batch-size 32" in _bare(cmds), cmds


# ---------------------------------------------------------------- names built to break out of the shell

PAYLOADS = ["x'; touch PWNED; echo '$(touch PWNED2)`touch PWNED3`", "x; touch PWNED; echo $(touch PWNED2) `touch PWNED3` > y"]


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("kind", ["own-line", "missing-file", "import-name"])
def test_a_name_copied_from_the_log_never_runs_anything(tmp_path: Path, kind: str, payload: str) -> None:
    """Each failure is really run under a hostile name (the script's folder, the file it opens, the name it
    imports from); every next command that carries a piece of that name is then run by bash in the run's
    directory: no file is created, and no word after a shell operator is one the log put there."""
    if kind == "own-line":
        log = _run(tmp_path, f"{payload}/train.py", "def f():\n    raise ValueError('bad config')\n\n\nf()\n")
    elif kind == "missing-file":
        log = _run(tmp_path, "train.py", f"open({payload!r} + '/data/val.csv').read()\n")
    else:
        (tmp_path / "helpers.py").write_text("def other():\n    pass\n")
        log = _run(tmp_path, "train.py", f"import importlib\nimportlib.import_module({payload!r})\n")
    cmds = commands(log)
    carried = [c for c in cmds if "touch" in c]
    if kind != "import-name":
        assert carried, cmds  # the command is still built, with the name quoted
    for c in carried:
        bare = c.split("   # ")[0]
        lex = shlex.shlex(bare, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        words = list(lex)
        started = [words[i + 1] for i, w in enumerate(words[:-1]) if set(w) <= OPERATORS]
        assert not [w for w in started if "touch" in w or "PWNED" in w], (c, started)
        _sh(bare, tmp_path)
        assert not list(tmp_path.rglob("PWNED*")), c
