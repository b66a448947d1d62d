"""Orchestrators: the Kubeflow job, Argo step, image, ZenML stack, Metaflow or KFP service, or SageMaker job an
error names.
"""

from __future__ import annotations

import shlex

from ml_skills.lazyre import lazy

_TRAINING_OP = lazy(r"\b(TFJob|PyTorchJob|MPIJob|XGBoostJob|PaddleJob|MXJob|JAXJob) ([a-z0-9][a-z0-9.-]{0,62}) has failed")
_ARGO_CHILD = lazy(r"child '([a-z0-9][a-z0-9.-]{2,62})' failed")
_IMAGE = lazy(r"(?:pulling image|pull image|Failed to pull image) \\?\"([\w./:@-]{2,200})\\?\"")
_K8S_STEP = lazy(r"(?i)This step is in (?:Failed|Error|Pending) state|phase: Failed|exitCode: \d+|kubelet|ImagePullBackOff|ErrImagePull|"
                 r"argoproj/argo|WorkflowExecutor|Failed to determine pid for containerID|Error \(exit code \d+\)|"
                 r"executable file not found in \$PATH")
_ZENML_STACK = lazy(r"Running pipeline [\w-]{1,80} on stack ([\w-]{1,80})")
_ZENML_FAILED = lazy(r"Failed to run step [\w-]{1,80}|Pipeline run has failed|failed for component '[\w-]{1,80}'")
_METAFLOW_SERVICE = lazy(r"Metadata request \(/flows/[\w/-]{1,200}\) failed \(code 5\d\d\)")
_KFP_API_DOWN = lazy(r"failed to (?:execute component|create task).{0,80}(?:Unavailable|connection (?:error|refused))")
_SM_CONTEXT = lazy(r"sagemaker-containers|ExecuteUserScriptError|sagemaker\.exceptions|/aws/sagemaker/")
_SM_JOB = lazy(r"(?:Error for Training job|Error training) ([A-Za-z0-9][A-Za-z0-9-]{0,62})[:\s]")
def orchestrator(text: str) -> list[str]:
    out: list[str] = []
    if (m := _TRAINING_OP.search(text)) is not None:
        kind, name = m.group(1).lower(), m.group(2)
        out.append(f"kubectl describe {kind} {name}; kubectl get pods -l training.kubeflow.org/job-name={name} -o wide"
                   "   # which replica failed, and its pod's exit reason (OOMKilled, Evicted, preempted)")
    elif (m := _ARGO_CHILD.search(text)) is not None:
        out.append(f"kubectl describe pod {m.group(1)}; kubectl logs {m.group(1)} -c main --tail=50"
                   "   # the failed step's pod: its exit reason and the last lines of its own log")
    if (m := _IMAGE.search(text)) is not None:
        out.append(f"docker manifest inspect {shlex.quote(m.group(1))} >/dev/null && echo found   # does the image exist, and can these "
                   "credentials read it (the nodes pull with their own)")
    elif not out and _K8S_STEP.search(text):
        out.append("kubectl get pods -A --field-selector=status.phase=Failed -o wide --sort-by=.status.startTime | tail -5"
                   "   # the step's pod, to describe it (exit code and reason: OOMKilled, Error, Evicted)")
    if (m := _ZENML_STACK.search(text)) is not None and _ZENML_FAILED.search(text):
        out.append(f"zenml stack describe {m.group(1)}   # the components (and their flavors and settings) the failed step ran with")
    if _METAFLOW_SERVICE.search(text):
        out.append("curl -sS -w ' %{http_code}\\n' \"$METAFLOW_SERVICE_URL/ping\"   # is the metadata service the flow reports to "
                   "answering now (5xx: its server or database, not the flow's code)")
    if _KFP_API_DOWN.search(text):
        out.append("kubectl get pods -n kubeflow -o wide | grep -v -E 'Running|Completed'   # the pipeline's own services "
                   "(API server, metadata, MinIO) that the step could not reach")
    if (m := _SM_JOB.search(text)) is None and _SM_CONTEXT.search(text):
        out.append("aws sagemaker list-training-jobs --status-equals Failed --sort-by CreationTime --max-results 3 "
                   "--query 'TrainingJobSummaries[].[TrainingJobName,CreationTime]' --output table   # the failed job, then "
                   "aws sagemaker describe-training-job --training-job-name with its name for its FailureReason")
    if m is not None:
        job = m.group(1)
        out.append(f"aws sagemaker describe-training-job --training-job-name {job} --query '[FailureReason,SecondaryStatus]'; "
                   f"aws logs tail /aws/sagemaker/TrainingJobs --log-stream-name-prefix {job} | tail -50"
                   "   # the job's reason and the last lines of the training script's own log")
    return out
