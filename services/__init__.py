"""The shell: the Redis event store, the worker pools (dramatiq actors), the
reactor, intake and sweeper, model adapters, tools and the CLI."""
