"""Duel data: reading tables, encoding covariates, building and splitting DuelData."""
