"""Cloud permissions and quotas, on GCP, AWS and Azure: the quota, role, bucket, client or service account an
error names; and any HTTP service's refusal of a URL (a model hub's rate limit, a tracker's 403).
"""

from __future__ import annotations

import shlex

from ml_skills.lazyre import lazy

_GCP_QUOTA_METRIC = lazy(r"exceed quota limits: ((?:[a-z]+\.)+googleapis\.com)/([\w/-]{3,120})")
_GCP_QUOTA_PROJECT = lazy(r"Quota failure for project ([a-z][a-z0-9-]{4,28}[a-z0-9])(?![\w-])")
_GCE_QUOTA = lazy(r"Quota '([A-Z0-9_]{3,60})' exceeded\.\s+Limit: [\d.]+ (?:in region ([a-z]+-[a-z]+\d)|globally)")
_GCP_REQUIRED = lazy(r"Required '([a-z]+\.[\w.]+)' permission for '(?://[\w.]+/)?projects/([a-z][a-z0-9-]{4,28}[a-z0-9])(?![\w-])")
_GCS_BUCKET = lazy(r"gs://([a-z0-9][a-z0-9._-]{1,61}[a-z0-9])|does not have storage\.\w+\.\w+ access to (?:the Google Cloud Storage "
                   r"bucket )?(?!the\b)([a-z0-9][a-z0-9._-]{1,61}[a-z0-9])(?:/|\.(?:\s|$)|\s|$)|/storage/v1/b/([a-z0-9][a-z0-9._-]{1,61}[a-z0-9])|"
                   r"to the bucket \\?[\"'`]([a-z0-9][a-z0-9._-]{1,61}[a-z0-9])\\?[\"'`]")
_GCP_DENIED = lazy(r"(?i)PERMISSION_DENIED|PermissionDenied|HTTP response code 40[13]|Forbidden|does not have [a-z]+\.[\w.]+ access|"
                   r"does not have `?\[?[a-z]+\.[\w.]+.{0,80}IAM permission|"
                   r"UNAUTHENTICATED|anonymous caller")
# "Error executing an HTTP request": TensorFlow's GCS file system (gs:// paths read and written through tf.io.gfile)
_GCP_CONTEXT = lazy(r"googleapis|gcloud|gs://|\bGCS\b|Google Cloud|gcr\.io|serviceaccount|aiplatform|storage\.\w+\.\w+|"
                    r"Error executing an HTTP request")
_AWS_CLIENT = lazy(r"An error occurred \((AccessDenied\w*|403|Forbidden|UnauthorizedOperation|AccessDeniedException)\) when calling the "
                   r"(\w{2,60}) operation")
_AWS_ROLE = lazy(r"arn:aws:iam::\d{12}:role/([\w+=,.@/-]{1,128})'?")
_AWS_ASSUME = lazy(r"(?i)unable to assume the role|sts:AssumeRole|AssumeRoleWithWebIdentity")
_AZ_CONTEXT = lazy(r"(?i)azure|azureml|\baz ml\b|Microsoft\.\w+|\bAML\b|Compute Instance|storage account|"
                  r"invalid status code '|HttpResponseError|aka\.ms/")
_AZ_DENIED = lazy(r"(?i)invalid status code 'Forbidden'|AuthorizationFailed|(?:not|n't) have permission|not an owner or assigned user|"
                  r"status code 'Unauthorized'")
_AZ_QUOTA = lazy(r"(?i)OutOfQuota|vCPU quota of \d+|cluster CPU quota|Family (?:v?CPUs|Cores) quota")
_SM_TYPE = lazy(r"training-job/(ml\.[a-z0-9]{1,8}\.\d{0,2}x?large)|\b(ml\.[a-z0-9]{1,8}\.\d{0,2}x?large) for training job usage")
_ACT_AS = lazy(r"permission to act as service[_ ]account:? `?([\w.-]{1,80}@[\w-]{1,80}\.(?:iam\.)?gserviceaccount\.com)")
_AZ_CLIENT = lazy(r"The client '([0-9a-f-]{36})'.{0,200}?perform action '([\w./-]{3,200})'(?: over scope '(/[\w./-]{3,400})')?")
_AZ_FAMILY = lazy(r"(Standard [\w ]{2,40}? Family) (?:v?CPUs|Cores) quota")
_AZ_LOCATION = lazy(r"\b(?:location|region)[ :='\"]+([a-z]+(?:us|europe|asia|uk|india|japan|australia|brazil|canada|korea|france|"
                    r"germany|norway|africa|uae|switzerland)\w*\d?)\b|\b((?:east|west|central|north|south|southcentral|northcentral|"
                    r"westcentral)us\d?|(?:north|west)europe)\b")
_AZML_RUN = lazy(r"RunId(?: for [\w ]{1,60})? is ([\w-]{8,80})")
_AZML_COMPUTE = lazy(r"AzureMLCompute cluster ([\w-]{2,32}) does not exist")


def gcp(text: str) -> list[str]:
    out: list[str] = []
    if (m := _GCP_QUOTA_METRIC.search(text)) is not None:
        service, metric = m.group(1), m.group(2)
        out.append(f"gcloud alpha services quota list --service={service} --consumer=projects/$(gcloud config get-value project) "
                   f"--filter='metric:{service}/{metric}' --format=json   # the limit and usage of the quota the job exceeded "
                   "(per region: request an increase where the job runs)")
    elif (m := _GCP_QUOTA_PROJECT.search(text)) is not None:
        out.append(f"gcloud alpha services quota list --service=ml.googleapis.com --consumer=projects/{m.group(1)} --format=json"
                   "   # the project's accelerator quotas for training jobs: a limit of 0 needs an increase request")
    if (m := _GCE_QUOTA.search(text)) is not None:
        metric, region = m.group(1), m.group(2)
        where = f"gcloud compute regions describe {region}" if region else "gcloud compute project-info describe"
        out.append(f"{where} --flatten=quotas --format='table(quotas.metric,quotas.limit,quotas.usage)' | grep -w {metric}"
                   "   # the quota's limit and usage")
    if (m := _GCP_REQUIRED.search(text)) is not None:
        out.append(f"gcloud projects get-iam-policy {m.group(2)} --flatten=bindings "
                   "--filter=\"bindings.members:$(gcloud config get-value account)\" --format='value(bindings.role)'"
                   f"   # the roles the active account has there; one must grant {m.group(1)}")
    if (m := _GCS_BUCKET.search(text)) is not None and _GCP_DENIED.search(text):
        bucket = next(g for g in m.groups() if g)
        out.append(f"gcloud storage buckets get-iam-policy gs://{bucket}   # who may read and write the bucket; the job's service account "
                   "needs a storage role on it (and the bucket must be in a project it can reach)")
    if (m := _ACT_AS.search(text)) is not None:
        out.append(f"gcloud iam service-accounts get-iam-policy {m.group(1)} --format=json   # who may act as it: the caller needs "
                   "roles/iam.serviceAccountUser on this service account")
    if not out and _GCP_DENIED.search(text) and _GCP_CONTEXT.search(text):
        out.append("gcloud auth list; gcloud config list   # the account and project the job's credentials resolve to "
                   "(on a VM or pod: its service account)")
    return out


def aws(text: str) -> list[str]:
    out: list[str] = []
    if _AWS_ASSUME.search(text) and (role := _AWS_ROLE.search(text)) is not None:
        name = role.group(1).split("/")[-1]
        out.append(f"aws iam get-role --role-name {shlex.quote(name)} --query Role.AssumeRolePolicyDocument"
                   "   # the principals allowed to assume the role: the service or identity provider must be one of them")
    if (m := _SM_TYPE.search(text)) is not None and "service limit '" not in text:  # commands.py reads the limit's own name
        kind = m.group(1) or m.group(2)
        out.append(f"aws service-quotas list-service-quotas --service-code sagemaker --query \"Quotas[?contains(QuotaName, '{kind} for "
                   "training job usage')].[QuotaName,Value]\" --output table"
                   f"   # the account's limit for {kind} training jobs in this region (0: request an increase, or another type)")
    if not out and (m := _AWS_CLIENT.search(text)) is not None:
        out.append(f"aws sts get-caller-identity   # the identity the job calls {m.group(2)} as (run where the job runs): "
                   "its policies must allow that call on the resource")
    return out


def azure(text: str) -> list[str]:
    out: list[str] = []
    if (m := _AZ_CLIENT.search(text)) is not None:
        scope = f" --scope {shlex.quote(m.group(3))}" if m.group(3) else " --all"
        out.append(f"az role assignment list --assignee {m.group(1)}{scope} --output table"
                   f"   # the roles the client has; one must allow {m.group(2)}")
    if (m := _AZ_FAMILY.search(text)) is not None and (loc := _AZ_LOCATION.search(text)) is not None:
        family = m.group(1)
        location = loc.group(1) or loc.group(2)
        out.append(f"az vm list-usage --location {location} --query \"[?contains(name.localizedValue, '{family}')]\" --output table"
                   "   # the family's core limit and use in that region")
    if not out and _AZ_DENIED.search(text) and _AZ_CONTEXT.search(text):
        out.append("az account show --query '{subscription:name,id:id,user:user.name}'; az role assignment list --assignee "
                   "\"$(az ad signed-in-user show --query id -o tsv)\" --all --output table   # the identity and subscription the call "
                   "used, and the roles it holds (the workspace, compute or storage account must be in one of their scopes)")
    if not out and _AZ_QUOTA.search(text) and _AZ_CONTEXT.search(text):
        out.append("az ml compute list-usage --output table   # the subscription's core quotas and use in the workspace's region "
                   "(with the workspace and resource group set by az configure --defaults)")
    if (m := _AZML_COMPUTE.search(text)) is not None:
        out.append(f"az ml compute list --output table   # the compute targets the workspace has; {m.group(1)} is not one of them")
    elif (m := _AZML_RUN.search(text)) is not None:
        out.append(f"az ml job show --name {m.group(1)} --query '{{status:status,error:error}}'"
                   "   # the run's own error (with the workspace and resource group set by az configure --defaults)")
    return out


# requests' raise_for_status wording, which huggingface_hub, the datasets library and many clients repeat: '429 Client
# Error: Too Many Requests for url: https://huggingface.co/api/...'
_HTTP_REFUSED = lazy(r"\b(401|403|429) Client Error: [^\n]{0,80}? for url: (https?://[\w.-]{1,253}(?::\d{1,5})?(?:/[\w.~%/-]{0,400})?)")
_WHY = {"401": "the credentials the job sends are refused: compare with the identity it should use",
        "403": "who may read it: the job's token lacks access (a gated or private repository, another account's project)",
        "429": "the rate limit: Retry-After and the limit headers say when to come back; many ranks asking at once hit it"}


def http_refusal(text: str) -> list[str]:
    """The URL an HTTP service refused, asked again for its status and headers (no body, no credentials, its query
    string left out: a token can ride in it)."""
    m = _HTTP_REFUSED.search(text)
    if m is None:
        return []
    return [f"curl -sS -o /dev/null -D - {shlex.quote(m.group(2))}   # the status and headers the service answers now: {_WHY[m.group(1)]}"]
