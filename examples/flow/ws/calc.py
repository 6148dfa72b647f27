"""Tiny arithmetic helpers (the example's bug lives here)."""


def add(a, b):
    return a - b


def mul(a, b):
    return a * b
