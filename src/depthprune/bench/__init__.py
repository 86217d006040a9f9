"""Benchmarks: ``python -m depthprune bench {evaluator,search,evaluate}``."""
