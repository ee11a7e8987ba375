"""benchbench: find the resource that limits deep-learning training on a machine."""

__version__ = "0.1.0"
