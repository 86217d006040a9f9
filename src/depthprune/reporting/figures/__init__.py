"""Figures: Figures 1–3, the decomposition and cross-seed figures, and the seaborn calls they share."""
