"""The handlers, the intake and the state cache on the cluster: runs driven step by
step, inbox partitions read per slot (one blocking read per partition, over every
publisher's stream of it: they share the partition's hash tag)."""

from test_handlers_on_redis import *  # noqa: F403
from test_intake_on_redis import *  # noqa: F403
from test_intake_streams import *  # noqa: F403
from test_state_cache import *  # noqa: F403
