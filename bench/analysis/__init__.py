"""What is computed from results: the summary, the fit and prediction behind `recommend`, the one
judge of which strategy to use (`judge`, worded once by `decision_words`), the advice worded once,
and `compare`. Never imports jax; with `bench.records` it is all the dashboard reads."""
