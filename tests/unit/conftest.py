"""Unit tests: pure, no Redis, no network, no clock. The helper modules next to
the tests (`runlog`, `journeys`, `strategies`) get pytest's assertion rewriting
so their checks explain themselves when they fail."""

import pytest

pytest.register_assert_rewrite("runlog", "journeys", "strategies", "handlerkit")
