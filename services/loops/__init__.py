"""The long-running loops: intake, reactor, sweeper."""
