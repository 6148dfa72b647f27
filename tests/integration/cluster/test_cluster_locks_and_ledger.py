"""The lock table and the ledger on the cluster: the randomised differential test of
the lock script against the pure rule (events/locks.py), the contract suites of
both ports, a killed holder's lease and fencing token."""

from test_locks_and_ledger_contract import *  # noqa: F403
from test_locks_on_redis import *  # noqa: F403
