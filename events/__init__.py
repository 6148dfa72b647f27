"""The pure core: event types, the run and tool-call state machines, the fold,
and the decisions every service makes. No Redis, no dramatiq, no clock, no I/O:
time and ids come in as arguments."""
