"""The `agentledger` command line: thin entrypoints over the services."""
