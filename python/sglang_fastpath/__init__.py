"""sglang-fastpath: a patch series on a pinned SGLang release, and the tools that build it."""

__all__ = ["__version__"]
__version__ = "0.1.0"
