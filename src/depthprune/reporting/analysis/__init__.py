"""The analyses behind the paper's claims, computed from the aggregate tables: agreement of the
pruned sets (Jaccard), Spearman correlations (perplexity–accuracy, loss–accuracy), the spread of
the averages over calibrations and algorithms (§5.2), the TLM-vs-perplexity contrast, and the
frame helpers they share. Descriptive: the verdicts are in ``reporting/verdicts/``."""
