"""The value types of `agentledger`'s arguments: each checks one value (a run id,
a queue, a count, a port…) and refuses it with a one-line reason argparse shows
after the argument's name, so no bad id, number or name reaches a model, a key
or Redis."""

from __future__ import annotations

import argparse
import os
import re

from agentledger.schemas.names import PUBLISHER_NAME_PATTERN, QUEUE_PATTERN, RUN_ID_PATTERN
from agentledger.services.entrypoints.reply import shown

POOLS = ("model", "tools", "accept")
INTAKE_POOL = "intake"  # `workers --pools intake`: the intake alone, no tool code
_QUEUE = re.compile(QUEUE_PATTERN)


def host_name(text: str) -> str:
    name = text.strip().lower()
    if not name or any(c in name for c in "/@?# ") or (":" in name and not name.startswith("[")):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a host name (a name or an address, no port)"
        )
    return name


def names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def publisher_name(text: str) -> str:
    if not re.fullmatch(PUBLISHER_NAME_PATTERN, text):
        raise argparse.ArgumentTypeError(
            f"{text!r}: a publisher name is letters, digits, '.', '_' or '-' (at most 64)"
        )
    return text


def pools(text: str) -> list[str]:
    pools = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in pools if p not in (*POOLS, INTAKE_POOL)]
    if unknown or not pools:
        raise argparse.ArgumentTypeError(
            f"{text!r}: the pools are {', '.join(POOLS)} (or {INTAKE_POOL} alone)"
        )
    if INTAKE_POOL in pools and len(set(pools)) > 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: {INTAKE_POOL} runs alone (it loads no tool code): --pools {INTAKE_POOL}"
        )
    return pools


def queue(text: str) -> str:
    if not _QUEUE.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r}: a queue name is letters, digits, '.', '_' or '-' (at most 64)"
        )
    return text


PROCESSES_PER_CPU = 4
MIN_MAX_PROCESSES = 8  # the bound on a machine of 1 or 2 CPUs


def max_processes() -> int:
    """The most worker processes one command starts: more than a few per CPU only
    adds memory and Redis connections (each process has its own threads)."""
    try:
        cpus = len(os.sched_getaffinity(0))  # the CPUs this process may run on
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(PROCESSES_PER_CPU * cpus, MIN_MAX_PROCESSES)


def processes(text: str) -> int:
    n, most = count(text), max_processes()
    if n > most:
        raise argparse.ArgumentTypeError(
            f"at most {most} worker processes here ({PROCESSES_PER_CPU} per CPU, "
            f"{MIN_MAX_PROCESSES} on a smaller machine), got {n}"
        )
    return n


def port(text: str) -> int:
    n = count(text)
    if n > 65535:
        raise argparse.ArgumentTypeError(f"a port is at most 65535, got {n}")
    return n


MAX_THREADS = 256  # threads per process: far past what one process keeps busy


def thread_count(text: str) -> int:
    n = positive(text)
    if n > MAX_THREADS:
        raise argparse.ArgumentTypeError(f"at most {MAX_THREADS} threads a process, got {n}")
    return n


def positive(text: str) -> int:
    n = count(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


MAX_WHOLE = 2**53  # the largest whole number every JSON reader and Redis take exactly


def count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {shown(text)}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {n}")
    if n > MAX_WHOLE:
        raise argparse.ArgumentTypeError(f"too large: at most {MAX_WHOLE:,}, got {shown(text)}")
    return n


_RUN_ID = re.compile(RUN_ID_PATTERN)
RUN_ID_RULE = (
    "a run id is a letter or digit, then letters, digits, '.', '_', ':' or '-', "
    "at most 128 in all (as `submit` and `runs` print it)"
)


def run_id(text: str) -> str:
    if not _RUN_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{shown(text)} is not a run id: {RUN_ID_RULE}")
    return text


MAX_CALL_ID = 256


def call_id(text: str) -> str:
    if (
        not text
        or len(text) > MAX_CALL_ID
        or not text.isprintable()
        or any(c.isspace() for c in text)
    ):
        raise argparse.ArgumentTypeError(
            f"{shown(text)} is not a call id: the id `status RUN` lists beside the call "
            f"(no spaces, at most {MAX_CALL_ID} characters)"
        )
    return text


def reply_text(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("a reply needs some text: what the run should do next")
    return text


def duration(text: str) -> float:
    """Seconds, or 30m, 12h, 7d, 2w (`agentledger.events.retention.parse_duration`)."""
    from agentledger.events.retention import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
