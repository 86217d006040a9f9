"""Statistics: the paired document bootstrap and its intervals, random-set and noise nulls, power
(minimum detectable differences), the two-stage bootstrap across seeds, exact Spearman tests on
distinct sets, and what a model that knows nothing scores (baselines, informative tasks)."""
