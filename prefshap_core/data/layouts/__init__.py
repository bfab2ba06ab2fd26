"""Reading data as it is published: the column mapping and the four layouts.

long (one row per duel), counts (wins per pair), wide (a choice between two
alternatives described on the row), rankings (items ranked within events).
"""
