"""One exception root for everything the product raises on purpose.

    MLSkillsError                 anything we expect and can explain in one line
    ├── InputError                the user's target or arguments cannot be used
    │   ├── TargetNotFound        no file, directory, process or run at that name
    │   ├── UnreadableInput       binary, special file, or not text we can decode
    │   └── PathNotAllowed        outside the allowed roots, or a hostile path
    ├── SourceError               a collector's source failed (remote host, tracker, cloud)
    │   ├── SourceTimeout         it did not answer before the deadline
    │   └── SourceUnavailable     refused, 4xx/5xx, malformed answer
    └── PolicyError               an action was refused by the policy layer

The CLI prints `str(error)` as one line and exits 2; the MCP server returns it as a tool error.
Messages speak to the reader and say what to do next.
"""


class MLSkillsError(Exception):
    """Root of all errors this product raises on purpose."""


class InputError(MLSkillsError):
    """The target or an argument cannot be used as given."""


class TargetNotFound(InputError):
    """No file, directory, process or run at that name."""


class UnreadableInput(InputError):
    """The input exists but is not text we can read (binary, FIFO, device)."""


class PathNotAllowed(InputError):
    """The path is outside the allowed roots or is hostile (NUL, symlink escape)."""


class SourceError(MLSkillsError):
    """A remote source (ssh host, tracker, cloud API) failed."""


class SourceTimeout(SourceError):
    """The source did not answer before its deadline."""


class SourceUnavailable(SourceError):
    """The source refused, answered with an error status, or sent a malformed answer."""


class PolicyError(MLSkillsError):
    """The policy layer refused an action."""


class DeadlinePassed(MLSkillsError):
    """The tool call this work was for ran past its deadline and was answered already: the work stops (calltime.py)."""
