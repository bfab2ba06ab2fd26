"""Reusable dashboard pieces: page guard, progress panel, export buttons, tables."""
