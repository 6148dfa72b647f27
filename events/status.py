"""The closed sets of states a run and a tool call can be in."""

from enum import StrEnum


class RunStatus(StrEnum):
    FLOWING = "flowing"  # a flow's own run: its stages go on (`agentledger.events.flow_state`)
    HELD = "held"  # past its tenant's cap of live runs on its queue: waits its turn
    REQUESTING_MODEL = "requesting_model"
    VALIDATING = "validating"
    RUNNING_TOOLS = "running_tools"
    ACCEPTING = "accepting"
    AWAITING_APPROVAL = "awaiting_approval"
    AWAITING_HUMAN = "awaiting_human"
    CANCELLING = "cancelling"
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

    @property
    def watched(self) -> bool:
        """The sweeper looks at it: live, or waiting on a deadline (approval expiry)."""
        return self in LIVE or self is RunStatus.AWAITING_APPROVAL

    @property
    def waiting(self) -> bool:
        """Not moving until a person (or another system) says something."""
        return self in (RunStatus.AWAITING_APPROVAL, RunStatus.AWAITING_HUMAN)

    @property
    def held(self) -> bool:
        """Created, waiting for its tenant's turn on its queue (`agentledger.events.run_caps`)."""
        return self is RunStatus.HELD


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
        RunStatus.FLOWING,
        RunStatus.REQUESTING_MODEL,
        RunStatus.VALIDATING,
        RunStatus.RUNNING_TOOLS,
        RunStatus.ACCEPTING,
        RunStatus.CANCELLING,
    }
)


class CallStatus(StrEnum):
    PROPOSED = "proposed"
    AWAITING_APPROVAL = "awaiting_approval"
    VALIDATED = "validated"
    WAITING = "waiting"  # for its resources' locks
    SCHEDULED = "scheduled"  # holds every lock it needs
    REJECTED = "rejected"
    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    OUTCOME_UNKNOWN = "outcome_unknown"
    CANCELLED = "cancelled"
    FORCE_TERMINATED = "force_terminated"

    @property
    def finished(self) -> bool:
        """The call has a result the model can be told."""
        return self in FINISHED


FINISHED = frozenset(
    {
        CallStatus.REJECTED,
        CallStatus.SUCCEEDED,
        CallStatus.FAILED,
        CallStatus.CANCELLED,
        CallStatus.FORCE_TERMINATED,
    }
)
