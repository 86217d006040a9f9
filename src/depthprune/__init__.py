"""depthprune: depth pruning of LLMs as subset selection (reproduction of arXiv 2604.24938)."""

__version__ = "0.1.0"
