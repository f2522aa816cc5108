"""The bench's records: the results schema, the child/parent wire records, the writer and the
reader.

Never imports jax: the dashboard and the analysis read results through this package.
"""
