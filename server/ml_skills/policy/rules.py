"""The team's policy file (TOML) on top of the built-in risk table: per action, then per target.

Precedence: built-in level (risk.py) < the file's [risk] table < the last matching
[[overrides]] entry. Dangerous actions are refused unless the file allows them, and even then
they still need the person's acceptance.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

from ml_skills.catalog import tomlcache
from ml_skills.errors import InputError
from ml_skills.modelkit import Field, ValidationError
from ml_skills.models import ActionKind, Model, Risk, new_dict, new_list
from ml_skills.policy.risk import ORDER, below_floor, risk_of

DEFAULT_POLICY = Path(__file__).with_name("default-policy.toml")


class Override(Model):
    action: str
    target: str = Field("*", description="Shell-style pattern matched against the action's target.")
    risk: Risk | None = None
    allow: bool | None = Field(None, description="For a dangerous action: may it run at all (after approval).")


class PolicyFile(Model):
    version: int = 1
    allow_dangerous: list[str] = Field(default_factory=new_list)
    risk: dict[str, Risk] = Field(default_factory=new_dict)
    overrides: list[Override] = Field(default_factory=new_list)


class Verdict(Model):
    action: str
    target: str
    risk: Risk
    rule: str = Field(description="The rule that decided the risk level.")
    allowed: bool = Field(description="False when the policy refuses the action outright.")
    needs_approval: bool = Field(description="True: it runs only after the person accepts it in the client.")


class Policy:
    def __init__(self, data: PolicyFile, source: str) -> None:
        self.data = data
        self.source = source

    def decide(self, action: str, target: str = "") -> Verdict:
        risk, rule = risk_of(action)
        if action in self.data.risk:
            risk, rule = self.data.risk[action], f"{self.source} [risk] {action} = {self.data.risk[action].value} (built-in: {rule})"
        allowed = risk is not Risk.DANGEROUS or action in self.data.allow_dangerous
        for i, o in enumerate(self.data.overrides):
            if o.action == action and fnmatch.fnmatchcase(target, o.target):
                if o.risk is not None:
                    risk, rule = o.risk, f"{self.source} overrides[{i}] ({action} on {o.target}) = {o.risk.value}"
                    allowed = risk is not Risk.DANGEROUS or action in self.data.allow_dangerous
                if o.allow is not None:
                    allowed = o.allow
                    rule += f"; {self.source} overrides[{i}] ({action} on {o.target}) allow = {str(o.allow).lower()}"
        if risk is Risk.DANGEROUS and allowed and action in self.data.allow_dangerous:
            rule += f"; {self.source} allow_dangerous lists it (the person is still asked)"
        elif risk is Risk.DANGEROUS and not allowed:
            rule += "; dangerous actions are refused unless the policy file allows them"
        elif not allowed:
            rule += "; refused by the policy file"
        if (floor := below_floor(action, risk)) is not None:  # load() refuses such files; kept here as a second lock
            risk, rule = floor, rule + f"; raised to {floor.value}: {action} can never run without the person's approval"
        return Verdict(action=action, target=target, risk=risk, rule=rule, allowed=allowed, needs_approval=risk is not Risk.SAFE)

    def risk_of(self, action: str) -> tuple[Risk, str]:
        """The risk level and rule of an action kind under this policy, for the planner (models.RiskOf): the
        same answer classify_action gives, so a report never rates a fix otherwise than request_action would."""
        v = self.decide(action)
        return v.risk, v.rule

    def decide_all(self, actions: list[str], target: str = "") -> Verdict:
        """The strictest verdict over several kinds one request amounts to (a repoint that is also a rollback)."""
        verdicts = [self.decide(a, target) for a in actions]
        worst = max(verdicts, key=lambda v: ORDER[v.risk])
        if len(verdicts) == 1:
            return worst
        rule = "; ".join(dict.fromkeys(v.rule for v in verdicts))
        allowed = all(v.allowed for v in verdicts)
        return worst.model_copy(update={"rule": rule, "allowed": allowed, "action": verdicts[0].action})


def load(path: str | Path | None = None) -> Policy:
    """Load a policy file (the shipped default when None); a bad file is a clear one-line error."""
    p = Path(path) if path is not None else DEFAULT_POLICY
    try:
        text = p.read_text("utf-8")
        raw = tomlcache.parsed(text) if path is None else _toml_loads(text)  # the shipped one: parsed once, kept
    except FileNotFoundError:
        raise InputError(f"no policy file at {p}: give an existing TOML file to --policy") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"policy file {p} cannot be read: {e}") from None
    except ValueError as e:
        import tomllib

        if not isinstance(e, tomllib.TOMLDecodeError):
            raise
        raise InputError(f"policy file {p} cannot be read: {e}") from None
    try:
        data = PolicyFile.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        raise InputError(f"policy file {p}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    _refuse_unknown_actions(p, data)
    lowered = [(f"risk.{a}", a, r) for a, r in data.risk.items()]
    lowered += [(f"overrides[{i}]", o.action, o.risk) for i, o in enumerate(data.overrides) if o.risk is not None]
    for where, action, risk in lowered:
        if (floor := below_floor(action, risk)) is not None:
            raise InputError(f"policy file {p}: {where}: {action} cannot be '{risk.value}': it starts a process, which "
                             f"always needs the person's approval (at least '{floor.value}')")
    return Policy(data, "default policy" if path is None else str(p))


def _toml_loads(text: str) -> dict:
    """A user's policy file, parsed each time (it is theirs to edit); `tomllib` imported only then."""
    import tomllib

    return tomllib.loads(text)


def _refuse_unknown_actions(p: Path, data: PolicyFile) -> None:
    """Every action a policy file names must be an action kind. Before the sixteenth round a misspelt one (`cancel_cloud_job`,
    or `cancel-cloud-jоb` with a Cyrillic о) was taken as another action and never matched: an override's `allow = false` on
    the team's production jobs, or a `[risk]` line tightening a kind, silently did nothing (docs/policy.md: a typo cannot
    silently loosen anything). The name is shown with its escapes, so a look-alike letter is seen."""
    named = [(f"allow_dangerous[{i}]", a) for i, a in enumerate(data.allow_dangerous)]
    named += [(f"risk.{a}", a) for a in data.risk] + [(f"overrides[{i}].action", o.action) for i, o in enumerate(data.overrides)]
    known = {k.value for k in ActionKind}
    for where, action in named:
        if action not in known:
            raise InputError(f"policy file {p}: {where}: {ascii(action)[:80]} is not an action kind (one of: "
                             f"{', '.join(sorted(known))})")


def to_wire(p: Policy) -> str:
    """The policy as one JSON string, for a worker process that must rate fixes by it (triage-runs' pool, Ray)."""
    return json.dumps({"source": p.source, "data": p.data.model_dump(mode="json")})


def from_wire(wire: str) -> Policy:
    """The policy `to_wire` sent; a worker never reads the policy file again (it may have changed since)."""
    raw = json.loads(wire)
    return Policy(PolicyFile.model_validate(raw["data"]), str(raw["source"]))
