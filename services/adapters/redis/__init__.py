"""Redis clients and the local Redis service."""
