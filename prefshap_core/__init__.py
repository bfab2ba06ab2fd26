"""Pref-SHAP Studio engine: duel data, kernel preference models, Shapley explanations.

No Streamlit here: the dashboard is a client of this package like the CLI is.
"""

__version__ = "0.1.0"
