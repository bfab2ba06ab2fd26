"""Analyses of a fitted preference function as a whole (not one duel at a time)."""
