"""Verdicts: the paper's observations judged on our numbers (holds / does not hold /
inconclusive), §5.2 in the paper's own words, the objective-or-data decomposition, the search
controls and the verdicts per seed."""
