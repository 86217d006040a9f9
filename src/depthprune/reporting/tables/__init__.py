"""Tables: the paper's Tables 1–6 and their CSV / Markdown / LaTeX renderings."""
