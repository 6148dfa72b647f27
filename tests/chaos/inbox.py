"""The inbox scenario: garbage of every kind among valid requests, and valid
request ids sent again under new run ids."""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path

from agentledger.schemas.inbox import RunRequested
from tests.chaos.garbage import INBOX_MAX_BYTES
from tests.chaos.garbage import garbage as make_garbage
from tests.chaos.kit import (
    QUEUE,
    cluster,
    spec,
    submit,
    use,
    write_fields,
    write_inbox,
    write_tool_module,
)
from tests.chaos.runs import Size, finish
from tests.chaos.tally import Figures


def inbox_garbage(tmp: Path, size: Size) -> Figures:
    """`garbage` bad entries of every kind (`tests.chaos.garbage`) among `valid`
    good ones, and the same request ids published again under new run ids."""
    f = Figures("inbox garbage", runs=size.valid)
    with cluster(tmp, "garbage", AGENTLEDGER_INBOX_MAX_BYTES=str(INBOX_MAX_BYTES)) as c:
        tools = write_tool_module(c.tmp / "tools")
        client = c.client()
        keys = c.keys
        rng = random.Random(5)
        workspaces: dict[str, Path] = {}
        valid: list[RunRequested] = []
        kinds: Counter[str] = Counter()
        for run_i in range(size.valid):
            run_id = f"g-{run_i:03d}"
            ws = c.tmp / "ws" / run_id
            ws.mkdir(parents=True)
            workspaces[run_id] = c.copy_of(run_id)  # where the run works, and its tools count
            turns = [
                {"tool_use": [use("w", "chaos_write", key="a", value="1")]},
                {"end_turn": "ok"},
            ]
            valid.append(RunRequested(
                run_id=run_id, request_id=f"req-{run_id}", spec=spec(turns, tools),
                base_dir=str(c.tmp), workspace=str(ws), queue=QUEUE,
            ))  # fmt: skip
        sample = valid[0].model_dump_json()
        at = sorted(rng.sample(range(size.garbage + size.valid), size.valid))
        valid_at = dict(zip(at, valid, strict=True))
        sent: list[RunRequested] = []
        reused = 0
        for i in range(size.garbage + size.valid):
            if (request := valid_at.get(i)) is not None:
                submit(client, keys, request)
                sent.append(request)
            else:
                if sent and rng.random() < 0.01:  # an earlier request id again, new run id
                    again = rng.choice(sent).model_copy(update={"run_id": f"dup-{i}"})
                    submit(client, keys, again)  # the same request: a no-op naming the first run
                    reused += 1
                kind, entry = make_garbage(rng, sample)
                if isinstance(entry, dict):
                    write_fields(client, keys, i, entry)  # type: ignore[arg-type]
                else:
                    write_inbox(client, keys, i, entry)
                kinds[kind] += 1
        sent_garbage = sum(kinds.values())
        began = time.monotonic()
        pool = c.workers(tools, processes=1)
        finish(f, c, workspaces, [], size, began)
        deadline = time.monotonic() + size.drain_s  # the last garbage may come after the runs
        while (pending := _pending(client, keys)) and time.monotonic() < deadline:
            time.sleep(0.2)
        f.elapsed_s = time.monotonic() - began
        rejected, unreasoned = _rejections(client, keys)
        dups = sum(1 for _ in client.scan_iter(match=f"{keys.prefix}:*run:dup-*", count=1000))
        client.close()
        assert c.intake is not None
        restarts = pool.tail(1 << 30).count("starting it again") + c.intake.tail(1 << 30).count(
            "starting it again"
        )
        f.extra.update(
            garbage=sent_garbage, kinds=len(kinds), request_ids_reused=reused, rejected=rejected,
            rejected_without_reason=unreasoned, pending=pending, intake_restarts=restarts,
            duplicate_runs=dups, entries_per_s=round((sent_garbage + size.valid) / f.elapsed_s),
        )  # fmt: skip
        f.expect(f"created {f.created} of {size.valid}", f.created == size.valid)
        f.expect(f"rejected {rejected} of {sent_garbage}", rejected == sent_garbage)
        f.expect(f"{unreasoned} rejected without a reason", unreasoned == 0)
        f.expect(f"{pending} entries pending", pending == 0)
        f.expect(f"{restarts} intake restarts", restarts == 0)
        f.expect(f"{dups} runs from a reused request_id", dups == 0)
    return f


def _rejections(client: object, keys: object) -> tuple[int, int]:
    total = unreasoned = 0
    for part in range(keys.inbox_partitions):  # type: ignore[attr-defined]
        stream = keys.rejected(part)  # type: ignore[attr-defined]
        last = "-"
        while True:
            batch = client.xrange(stream, min=last, count=1000)  # type: ignore[attr-defined]
            batch = [b for b in batch if b[0].decode() != last]
            if not batch:
                break
            for _id, fields in batch:
                total += 1
                unreasoned += not fields.get(b"reason")
            last = batch[-1][0].decode()
    return total, unreasoned


def _pending(client: object, keys: object) -> int:
    n = 0
    for part in range(keys.inbox_partitions):  # type: ignore[attr-defined]
        stream = keys.inbox(part, "chaos")  # type: ignore[attr-defined]  # the chaos publisher's
        n += client.xlen(stream)  # type: ignore[attr-defined]
    return int(n)
