"""Timing scripts (not evaluation benchmarks): ``python -m depthprune timing {evaluator,search,evaluate,stages}``."""
