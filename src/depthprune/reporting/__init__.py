"""Reporting: aggregation of result files, the paper's analyses, Figures 1-3 and Tables 1-6.

Everything here reads files only (selection.json, metrics.csv, then ``results/aggregate/``); it never
loads a model, so ``depthprune render`` runs in seconds and imports neither torch nor transformers.
Keep it that way: no import from ``depthprune.models``, ``engine`` or ``search`` in this package.
"""
