"""Pref-SHAP Studio dashboard (Streamlit): a thin client of ``prefshap_core``."""
