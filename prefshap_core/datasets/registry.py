"""The named datasets: what can be loaded here, and loading one by name or folder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prefshap_core.data.build import load_directory
from prefshap_core.data.duel_data import DuelData
from prefshap_core.datasets import real, synthetic
from prefshap_core.errors import DatasetUnavailableError


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    description: str
    available: bool
    reason: str  # why not available ("" when it is)


@dataclass(frozen=True)
class _Entry:
    description: str
    load: Callable[..., DuelData]
    real: bool  # read from the data directory (else generated)


_DATASETS = {
    "synthetic": _Entry(
        "clusters game of the paper's Sec. 4: 1,000 items, 40,000 duels (generated)",
        lambda *, seed, data_dir, **kw: synthetic.synthetic_clusters(seed=seed, **kw),
        real=False,
    ),
    "gpm_synthetic": _Entry(
        "duels from a random GPM on 2 of 10 features, paper App. B (generated)",
        lambda *, seed, data_dir, **kw: synthetic.gpm_generated(seed=seed, **kw),
        real=False,
    ),
    "chameleons": _Entry("106 contests between 35 dwarf chameleons", real.chameleons, True),
    "pokemon": _Entry("50,000 battles among 800 Pokémon", real.pokemon, True),
    "tennis": _Entry("ATP singles matches 1991-2017 with court context (C-GPM)", real.tennis, True),
}
DATASET_NAMES = tuple(_DATASETS)


def available_datasets(data_dir: str | Path | None = None) -> list[DatasetInfo]:
    """Every named dataset, and whether it can be loaded from ``data_dir`` (default: env)."""
    infos = []
    for name, entry in _DATASETS.items():
        reason = ""
        if entry.real:
            try:
                real.dataset_folder(name, data_dir)
            except DatasetUnavailableError as exc:
                reason = str(exc)
        infos.append(DatasetInfo(name, entry.description, not reason, reason))
    return infos


def load_dataset(
    name_or_dir: str | Path, *, seed: int = 0, data_dir: str | Path | None = None, **kwargs: object
) -> DuelData:
    """A named dataset (see :data:`DATASET_NAMES`) or a folder with items.csv and duels.csv.

    ``seed`` drives generation and the orientation coin; ``kwargs`` go to the
    generator (e.g. ``n_items``) or to ``build_duel_data`` for a folder; every
    loader takes ``missing_indicators`` (``build_duel_data``'s switch).
    """
    entry = _DATASETS.get(str(name_or_dir))
    if entry is not None:
        return entry.load(seed=seed, data_dir=data_dir, **kwargs)
    if Path(name_or_dir).is_dir():
        return load_directory(name_or_dir, seed=seed, **kwargs)
    raise DatasetUnavailableError(
        f"no dataset {str(name_or_dir)!r}: give one of {', '.join(DATASET_NAMES)}, "
        "or a folder that holds items.csv and duels.csv"
    )
