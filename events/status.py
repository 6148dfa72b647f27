"""The closed sets of states a run and a tool call can be in."""

from enum import StrEnum


class RunStatus(StrEnum):
    REQUESTING_MODEL = "requesting_model"
    VALIDATING = "validating"
    RUNNING_TOOLS = "running_tools"
    ACCEPTING = "accepting"
    AWAITING_HUMAN = "awaiting_human"
    COMPLETED = "completed"
    FAILED = "failed"
    BUDGET_EXHAUSTED = "budget_exhausted"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def live(self) -> bool:
        """Moving on by itself: some worker has a step to do."""
        return self in LIVE


TERMINAL = frozenset(
    {
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.BUDGET_EXHAUSTED,
        RunStatus.TIMEOUT,
        RunStatus.CANCELLED,
    }
)
LIVE = frozenset(
    {
        RunStatus.REQUESTING_MODEL,
        RunStatus.VALIDATING,
        RunStatus.RUNNING_TOOLS,
        RunStatus.ACCEPTING,
    }
)


class CallStatus(StrEnum):
    PROPOSED = "proposed"
    VALIDATED = "validated"
    REJECTED = "rejected"
    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    OUTCOME_UNKNOWN = "outcome_unknown"

    @property
    def finished(self) -> bool:
        """The call has a result the model can be told."""
        return self in FINISHED


FINISHED = frozenset({CallStatus.REJECTED, CallStatus.SUCCEEDED, CallStatus.FAILED})
