"""The dramatiq broker on Redis Streams, and the choice of broker."""
