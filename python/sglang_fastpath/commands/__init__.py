"""One module per CLI verb, each with ``register(subparsers)``."""
