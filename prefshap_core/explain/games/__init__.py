"""Value functions of Pref-SHAP as games over feature groups (``base``: the seam)."""
