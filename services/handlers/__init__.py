"""Thin handlers, one per worker pool: load -> decide -> append, with the I/O
of the step (model call, tool run, checks) between a claim and its result."""
