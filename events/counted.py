"""Counted nouns in the text people read: `1 turn`, `2 turns`, `0 calls`."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun, singular for exactly one (`plural`: an irregular plural)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
