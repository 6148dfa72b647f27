"""Errors of the shell. Each says whether retrying can help."""

from __future__ import annotations


class ServiceError(Exception):
    retryable = False


class ConfigError(ServiceError):
    def __init__(self, name: str, reason: str):
        self.name = name
        self.reason = reason
        super().__init__(f"{name}: {reason}")


class BadOption(ConfigError):
    """An option whose value the command cannot use (exit 2, the option named)."""


class ConcurrencyConflict(ServiceError):
    """The run moved past the seq the writer folded from: reload and decide again."""

    retryable = True

    def __init__(self, run_id: str, expected_seq: int, actual_seq: int):
        self.run_id = run_id
        self.expected_seq = expected_seq
        self.actual_seq = actual_seq
        super().__init__(f"run {run_id!r} is at seq {actual_seq}, not {expected_seq}")


class UnknownRun(ServiceError):
    def __init__(self, run_id: str):
        self.run_id = run_id
        super().__init__(f"no run {run_id!r}")


class SampleMisread(ServiceError):
    """The sample run (`agentledger.events.sample_run`), read back as a first load reads a run,
    is not the run it was: this build would load runs wrong, so no worker starts."""

    def __init__(self, what: str):
        self.what = what
        super().__init__(f"the sample run read back through the codec and a snapshot: {what}")


class TooContended(ServiceError):
    """A step kept losing the optimistic race; a later delivery may succeed."""

    retryable = True


class RedisUnavailable(ServiceError):
    retryable = True


class ServiceBusy(ServiceError):
    """The local Redis service still has clients (a run, workers, a tail): not stopped."""

    def __init__(self, clients: int):
        self.clients = clients
        super().__init__(
            f"{clients} other connection{'s are' if clients != 1 else ' is'} open to it "
            "(a run, workers or a tail)"
        )


class ProviderUnready(ServiceError):
    """A run's model provider cannot be reached from here (no key, no answer):
    said before the run is created, and nothing is recorded."""

    def __init__(self, what: str, detail: str, *, variable: str | None = None):
        self.what = what
        self.detail = detail
        self.variable = variable
        super().__init__(f"{what}: {detail}")
