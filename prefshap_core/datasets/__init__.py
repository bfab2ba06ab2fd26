"""Built-in datasets: generated (synthetic clusters, GPM) and real (from the data dir)."""

from prefshap_core.datasets.real import chameleons, dataset_folder, pokemon, tennis
from prefshap_core.datasets.registry import (
    DATASET_NAMES,
    DatasetInfo,
    available_datasets,
    load_dataset,
)
from prefshap_core.datasets.synthetic import gpm_generated, synthetic_clusters

__all__ = [
    "DATASET_NAMES",
    "DatasetInfo",
    "available_datasets",
    "chameleons",
    "dataset_folder",
    "gpm_generated",
    "load_dataset",
    "pokemon",
    "synthetic_clusters",
    "tennis",
]
