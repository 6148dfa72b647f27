"""Contract suites: what every adapter of a port must do, written once as a base
class that each tier subclasses with its adapter (the in-memory ones in the unit
tier, the Redis ones in the integration tier)."""
