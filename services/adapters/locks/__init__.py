"""The resource lock table."""
