"""Local stand-ins of outside services, for tests."""
