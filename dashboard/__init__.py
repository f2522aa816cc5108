"""The loadbench dashboard: a thin Streamlit view over a results folder (never imports jax).

`app.py` is the entry point (`streamlit run dashboard/app.py`, or `loadbench dashboard`); the pages
live in `views/` (not `pages/`: Streamlit would list that folder itself and open its files
without `app.py` on a deep link; they are listed once in `views/__init__.py`), the charts in
`charts.py`, the data access (the bench's one reader) in `data.py`.
"""

RESULTS_ENV = "LOADBENCH_RESULTS"  # the results folder the app shows (set by `loadbench dashboard`)
MAKE_COMMAND = "make bench SHAPES=gpt2"  # what the empty state tells the user to run
