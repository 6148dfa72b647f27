"""Unit tests: pure, no Redis, no network, no clock. The core is tested through
its decisions; the handlers through the in-memory store, lock table and ledger
(`handlerkit`), which pass the contract suites their Redis adapters pass
(`tests/contracts`). The helper modules next to the tests (`runlog`, `journeys`,
`strategies`, `handlerkit`) get pytest's assertion rewriting so their checks
explain themselves when they fail."""

import pytest

pytest.register_assert_rewrite("runlog", "journeys", "strategies", "handlerkit")
