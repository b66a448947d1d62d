"""The result shape shared by preflight-run and verify-artifacts: named checks with a verdict."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field

from ml_skills.models import Decision, Model


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"


class Check(Model):
    name: str
    verdict: Verdict
    detail: str
    fix: str | None = Field(None, description="What to do when it does not pass.")


class CheckReport(Model):
    """A gate: GO only when every required check passes (fails closed)."""

    kind: str = Field(description="preflight-run or verify-artifacts")
    target: str
    created_at: datetime
    checks: list[Check]
    decision: Decision
    decision_reason: str
    facts: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def gate(cls, kind: str, target: str, checks: list[Check], required: set[str], facts: dict[str, str] | None = None) -> CheckReport:
        from datetime import UTC

        failing = [c for c in checks if c.name in required and c.verdict is not Verdict.PASS]
        if failing:
            decision, why = Decision.NO_GO, "required checks did not pass: " + ", ".join(c.name for c in failing)
        else:
            decision, why = Decision.GO, f"all {len(required)} required checks passed"
        return cls(kind=kind, target=target, created_at=datetime.now(UTC), checks=checks, decision=decision,
                   decision_reason=why, facts=facts or {})

    def render(self) -> str:
        mark = {Verdict.PASS: "PASS", Verdict.FAIL: "FAIL", Verdict.WARN: "WARN", Verdict.SKIP: "SKIP"}
        lines = [f"{self.kind}: {self.target}"]
        lines += [f"{k}: {v}" for k, v in self.facts.items()]
        for c in self.checks:
            lines.append(f"[{mark[c.verdict]}] {c.name}: {c.detail}")
            if c.fix and c.verdict is not Verdict.PASS:
                lines.append(f"       fix: {c.fix}")
        lines.append(f"Decision: {self.decision.value} ({self.decision_reason})")
        return "\n".join(lines) + "\n"
