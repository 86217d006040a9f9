"""Pages: docs/results.md and the README's headline table, from the committed studies' rendered files."""
