"""Reporting: aggregation of result files, the paper's analyses, Figures 1-3 and Tables 1-6.

Everything here reads files only (selection.json, metrics.csv, then ``results/aggregate/``); it never
loads a model, so ``depthprune render`` runs in seconds and imports neither torch nor transformers.
Keep it that way: no import from ``depthprune.models``, ``engine`` or ``search`` in this package.

Rooms: ``statistics/`` (bootstrap, nulls, power, baselines), ``analysis`` (the descriptive tables
of the paper's analyses), ``verdicts/`` (observations and their verdicts), ``figures/``,
``tables/``, ``pages/`` (the results page). At the top: ``aggregate`` (result files into
``results/aggregate/``), ``base_study``, ``provenance``, ``style`` (order, names, colours shared by
every room), ``render`` and ``calibration_size`` (which call the rooms), ``cli``.
"""
