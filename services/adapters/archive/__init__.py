"""The cold store finished runs are archived to (retention): a folder by default, or
any URL fsspec knows (S3, GCS, Azure, memory) where the operator installs fsspec and
its plugin (`agentledger[archive]`). One compressed, checksummed segment per run
(`segment`), written atomically; a tombstone per request id of an archived run."""
