"""Tools: the registry, what a running tool gets, how it is run."""
