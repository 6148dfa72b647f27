"""The benchmark behind `make bench` (`python -m tests.bench [--quick]`): the
workloads (`ours`, `state_load`, `recovery`), the floor (`floor`), the peers
(`peers`, `peer_agents`), the harness that runs worker processes on a private
Redis (`harness`, `counted_worker`), and the report (`report`)."""
