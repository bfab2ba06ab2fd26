"""Loaders of the real duel datasets, read from the data directory (never the repository).

Each loader maps its source's own columns onto the upload format and calls
``build_duel_data(..., on_invalid="drop")``: unusable rows are dropped and counted
in ``DuelData.report``, not fatal, because the sources are not ours to fix.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from prefshap_core import paths
from prefshap_core.data.build import build_duel_data
from prefshap_core.data.csv_io import is_number_text, read_table, row_numbers, text_cells
from prefshap_core.data.duel_data import DuelData
from prefshap_core.errors import DatasetUnavailableError, DataValidationError

CHAMELEON_TRAITS = ("ch.res", "jl.res", "tl.res", "mass.res", "SVL", "prop.main", "prop.patch")
POKEMON_STATS = ("HP", "Attack", "Defense", "Sp. Atk", "Sp. Def", "Speed")
TENNIS_NUMERIC = ("birth_year", "height_cm", "weight_kg", "turned_pro_age")
TENNIS_CATEGORICAL = ("handedness", "backhand")
TENNIS_CONTEXT = ("tourney_conditions", "tourney_surface")

SOURCES = {
    "chameleons": (
        ("predictors.csv", "contests.csv"),
        "the chameleons data of the R package BradleyTerry2 (GPL >= 2), "
        "https://cran.r-project.org/package=BradleyTerry2",
    ),
    "pokemon": (
        ("pokemon.csv", "combats.csv"),
        'Kaggle "Pokemon Challenge", https://www.kaggle.com/datasets/terminus7/pokemon-challenge',
    ),
    "tennis": (
        ("player_overviews.csv", "player_overviews_column_titles.txt", "matches_1991_2017.csv"),
        "ATP World Tour data (CC BY 4.0), "
        "https://github.com/serve-and-volley/atp-world-tour-tennis-data",
    ),
}


def dataset_folder(name: str, root: str | Path | None = None) -> Path:
    """``<data dir>/<name>``, after checking that every file the loader reads is there."""
    folder = (Path(root) if root is not None else paths.data_dir()) / name
    files, source = SOURCES[name]
    for file in files:
        if not (folder / file).is_file():
            raise DatasetUnavailableError(
                f"dataset {name!r} needs {folder / file}, which is missing. Get it from "
                f"{source}, put its files in {folder}/, or point "
                f"${paths.DATA_DIR_ENV} at a directory that holds {name}/"
            )
    return folder


def chameleons(
    *, seed: int = 0, data_dir: str | Path | None = None, missing_indicators: bool = True
) -> DuelData:
    """106 contests between 35 male dwarf chameleons; 7 numeric traits (Stuart-Fox 2006)."""
    folder = dataset_folder("chameleons", data_dir)
    items = read_table(folder / "predictors.csv", file_name="chameleons/predictors.csv")
    contests = read_table(folder / "contests.csv", file_name="chameleons/contests.csv")
    duels = _duels(
        contests, left=contests["winner"], right=contests["loser"], winner=contests["winner"]
    )
    return build_duel_data(
        items.rename(columns={"ID": "id"})[["id", *CHAMELEON_TRAITS]],
        duels,
        name="chameleons",
        numeric=CHAMELEON_TRAITS,
        context_columns=[],
        seed=seed,
        on_invalid="drop",
        missing_indicators=missing_indicators,
        items_file="chameleons/predictors.csv",
        duels_file="chameleons/contests.csv",
    )


def pokemon(
    *, seed: int = 0, data_dir: str | Path | None = None, missing_indicators: bool = True
) -> DuelData:
    """50,000 battles among 800 Pokémon: six stats, Legendary (0/1), "Type" multi-hot."""
    folder = dataset_folder("pokemon", data_dir)
    table = read_table(folder / "pokemon.csv", file_name="pokemon/pokemon.csv")
    combats = read_table(folder / "combats.csv", file_name="pokemon/combats.csv")
    items = table.rename(columns={"#": "id"})
    items = items[["id", "Name", *POKEMON_STATS, "Type 1", "Type 2", "Legendary"]]
    duels = _duels(
        combats,
        left=combats["First_pokemon"],
        right=combats["Second_pokemon"],
        winner=combats["Winner"],
    )
    return build_duel_data(
        items,
        duels,
        name="pokemon",
        label_column="Name",
        numeric=[*POKEMON_STATS, "Legendary"],
        multi_categorical={"Type": ["Type 1", "Type 2"]},
        context_columns=[],
        seed=seed,
        on_invalid="drop",
        missing_indicators=missing_indicators,
        items_file="pokemon/pokemon.csv",
        duels_file="pokemon/combats.csv",
    )


def tennis(
    *, seed: int = 0, data_dir: str | Path | None = None, missing_indicators: bool = True
) -> DuelData:
    """ATP singles matches 1991-2017 (C-GPM): player covariates, court context.

    Items are the players who appear in a match with two known players: birth
    year, height, weight, turned-pro age (turned_pro - birth_year), handedness and
    backhand; a 0 in height, weight or turned_pro means unknown and is imputed (and
    reported). Context: indoor/outdoor and surface. Matches with a player missing
    from the overview table are dropped (and reported). Djokovic is ``d643``.
    """
    folder = dataset_folder("tennis", data_dir)
    overviews_file = "tennis/player_overviews.csv"
    titles = (folder / "player_overviews_column_titles.txt").read_text().split()
    # The source file has no header row: prepend one, so its data row r is at line r.
    header = ",".join(titles).encode() + b"\n"
    players = read_table(
        header + (folder / "player_overviews.csv").read_bytes(), file_name=overviews_file
    )
    matches = read_table(folder / "matches_1991_2017.csv", file_name="tennis/matches_1991_2017.csv")
    duels = _duels(
        matches, left=matches["winner_id"], right=matches["loser_id"], winner=matches["winner_id"]
    )
    duels["duel_id"] = matches["match_id"]
    for column in TENNIS_CONTEXT:
        duels[column] = matches[column]

    known = set(text_cells(players["player_id"]).tolist())
    playable = duels["left"].isin(known) & duels["right"].isin(known)
    in_matches = set(duels["left"][playable]) | set(duels["right"][playable])
    players = players[players["player_id"].isin(in_matches)]
    repeated = players["player_id"].duplicated()
    players = players[~repeated]
    items = _tennis_items(players, overviews_file)
    data = build_duel_data(
        items,
        duels,
        name="tennis",
        numeric=TENNIS_NUMERIC,
        categorical=TENNIS_CATEGORICAL,
        context_columns=TENNIS_CONTEXT,
        seed=seed,
        on_invalid="drop",
        missing_indicators=missing_indicators,
        items_file=overviews_file,
        duels_file="tennis/matches_1991_2017.csv",
    )
    notes = [f"tennis: kept the {len(items)} players who play a match with two known players"]
    if repeated.any():
        notes.append(f"tennis: {int(repeated.sum())} repeated rows of the player table ignored")
    notes.append("tennis: 0 in height_cm, weight_kg or turned_pro means unknown (imputed)")
    return replace(data, report=replace(data.report, notes=data.report.notes + tuple(notes)))


def _tennis_items(players: pd.DataFrame, file_name: str) -> pd.DataFrame:
    numbers = {
        column: _numbers(players, column, file_name)
        for column in ("birth_year", "height_cm", "weight_kg", "turned_pro")
    }
    for column in ("height_cm", "weight_kg", "turned_pro"):
        numbers[column][numbers[column] == 0] = np.nan  # the source's "unknown"
    first = players["first_name"].fillna("").astype(str)
    last = players["last_name"].fillna("").astype(str)
    items = pd.DataFrame(
        {
            "id": players["player_id"].to_numpy(),
            "name": (first + " " + last).str.strip().to_numpy(),
            "birth_year": numbers["birth_year"],
            "height_cm": numbers["height_cm"],
            "weight_kg": numbers["weight_kg"],
            "turned_pro_age": numbers["turned_pro"] - numbers["birth_year"],
            "handedness": players["handedness"].to_numpy(),
            "backhand": players["backhand"].to_numpy(),
        },
        index=players.index,
    )
    items.loc[items["name"] == "", "name"] = None
    return items


def _numbers(table: pd.DataFrame, column: str, file_name: str) -> np.ndarray:
    cells = text_cells(table[column])
    for position, cell in enumerate(cells.tolist()):
        if cell is not None and not is_number_text(cell):
            raise DataValidationError(
                f"{cell!r} is not a number",
                file=file_name,
                row=int(row_numbers(table)[position]),
                column=column,
            )
    return np.array([np.nan if cell is None else float(cell) for cell in cells.tolist()])


def _duels(
    source: pd.DataFrame, *, left: pd.Series, right: pd.Series, winner: pd.Series
) -> pd.DataFrame:
    """A duels table in the upload format, keeping the source's row numbers."""
    columns = {"left": left, "right": right, "winner": winner}
    return pd.DataFrame({k: v.to_numpy() for k, v in columns.items()}, index=source.index)
