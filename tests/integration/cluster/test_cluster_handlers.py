"""The handlers, the intake and the state cache on the cluster: runs driven step by
step, inbox partitions read per slot (one blocking read per partition)."""

from test_handlers_on_redis import *  # noqa: F403
from test_intake_on_redis import *  # noqa: F403
from test_state_cache import *  # noqa: F403
