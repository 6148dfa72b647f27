"""Errors of the contract layer. Each carries what is wrong; decoding errors
keep the raw bytes so a bad entry can be inspected and moved aside."""

from __future__ import annotations


class SchemaError(Exception):
    """Base of the contract layer's errors. Retrying never helps: the data is wrong."""

    retryable = False


class InvalidEvent(SchemaError):
    """An encoded event that cannot be decoded: names the field and keeps the bytes."""

    def __init__(self, reason: str, *, field: str | None = None, raw: bytes | None = None):
        self.reason = reason
        self.field = field
        self.raw = raw
        where = f" (field {field!r})" if field else ""
        super().__init__(f"invalid event{where}: {reason}")


class SpecProblem:
    """One thing wrong with a spec: where (a dotted path into it, "" for the whole
    file), why in plain words, and the line of the file when known."""

    __slots__ = ("field", "reason", "line")

    def __init__(self, field: str, reason: str, line: int | None = None):
        self.field = field
        self.reason = reason
        self.line = line

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}" if self.field else self.reason

    def as_dict(self) -> dict[str, object]:
        return {"field": self.field, "reason": self.reason, "line": self.line}


class InvalidSpec(SchemaError):
    """A run spec that cannot be accepted, with every problem found at once.
    `field` and `reason` are the first problem's (a dotted path into the spec)."""

    def __init__(self, field: str, reason: str, *, source: str | None = None):
        self.problems: tuple[SpecProblem, ...] = (SpecProblem(field, reason),)
        self.source = source  # the spec file, when there is one
        self.field = field
        self.reason = reason
        super().__init__(self.render())

    @classmethod
    def of(cls, problems: list[SpecProblem], *, source: str | None = None) -> InvalidSpec:
        if not problems:
            raise ValueError("an InvalidSpec needs at least one problem")
        error = cls(problems[0].field, problems[0].reason, source=source)
        error.problems = tuple(problems)
        error.args = (error.render(),)
        return error

    def render(self) -> str:
        """`file:line: field: reason` for one problem; else a count, then one
        indented `line N: field: reason` each."""
        if len(self.problems) == 1:
            p = self.problems[0]
            where = ":".join(str(x) for x in (self.source, p.line) if x)
            return f"{where}: {p}" if where else str(p)
        lines = "\n".join(f"  line {p.line}: {p}" if p.line else f"  {p}" for p in self.problems)
        head = f"{self.source}: " if self.source else ""
        return f"{head}{len(self.problems)} problems\n{lines}"

    def as_list(self) -> list[dict[str, object]]:
        return [p.as_dict() for p in self.problems]
