"""Pref-SHAP Studio engine: duel data, kernel preference models, Shapley explanations.

No Streamlit here: the dashboard is a client of this package like the CLI is.
"""

import os

# OpenMP threads that spin while they wait make every small torch operation many
# times slower when the cores are shared (a busy laptop, a server with several
# sessions): measured 24 s -> 97 s for one explanation at load 5. Sleeping waits
# cost almost nothing on an idle machine. Only effective before torch is imported;
# set OMP_WAIT_POLICY yourself to override.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
