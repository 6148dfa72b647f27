"""The fault-injection suite (`make chaos`, `python -m tests.chaos`): runs under
random SIGKILLs of worker processes, Redis killed and restarted from its AOF,
a frozen lock holder, garbage on the inbox, two users' same-named tools on one
Redis and a Redis outage with the workers alive — each on a private
redis-server of its own — and the figures they give."""
