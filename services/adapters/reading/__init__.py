"""The read side: what commands that read (the CLI, the web view) ask of the
logs — a run's events and raw entries, a wait for its next append, the shard
feeds — behind one port (`port.RunReader`), with a Redis adapter and a memory
twin that pass the same contract suite; and the one loop that follows a run
(`follow`)."""
