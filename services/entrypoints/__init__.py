"""Entrypoints: the dramatiq actors and the command line."""
