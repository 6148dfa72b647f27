"""Prometheus metrics: counted from what the workers hold, read from Redis when scraped."""
