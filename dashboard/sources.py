"""Where data comes from: the built-in datasets and uploaded CSV files.

Parsing is cached with ``st.cache_data`` (keyed by the dataset name, or by the
uploaded bytes and file names), so a rerun or another session never parses the
same files twice. Every engine error (``DataValidationError``: file, row, column)
reaches the caller unchanged, for the page to show.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import streamlit as st

from dashboard import state
from prefshap_core import budget, workflow
from prefshap_core.data import DuelData, build_duel_data, read_table
from prefshap_core.datasets import available_datasets, load_dataset, synthetic_clusters
from prefshap_core.paths import repo_root

# The first screen's data: the paper's clusters game, scaled down to train in seconds.
DEMO_KEY = "builtin:demo"
DEMO_ITEMS, DEMO_DUELS = 400, 3000
SAMPLE_DIR = repo_root() / "sample_data"


@dataclass(frozen=True)
class BuiltinChoice:
    key: str
    name: str  # prefshap_core.datasets name
    title: str
    description: str
    available: bool
    reason: str = ""


def builtin_choices() -> list[BuiltinChoice]:
    """The demo, plus every named dataset with whether it can be loaded here."""
    choices = [
        BuiltinChoice(
            DEMO_KEY,
            "synthetic",
            f"Synthetic clusters (demo: {DEMO_ITEMS} items, {DEMO_DUELS:,} duels)",
            "the paper's clusters game, small enough to train in seconds",
            True,
        )
    ]
    titles = {
        "synthetic": "Synthetic clusters (paper size)",
        "gpm_synthetic": "Synthetic GPM (paper App. B)",
        "chameleons": "Chameleons",
        "pokemon": "Pokémon",
        "tennis": "Tennis (ATP, with court context)",
    }
    for info in available_datasets():
        choices.append(
            BuiltinChoice(
                f"builtin:{info.name}",
                info.name,
                titles.get(info.name, info.name),
                info.description,
                info.available,
                info.reason,
            )
        )
    return choices


@st.cache_data(show_spinner=False, max_entries=8)
def _builtin_data(name: str, demo: bool) -> DuelData:
    if demo:
        return synthetic_clusters(n_items=DEMO_ITEMS, n_duels=DEMO_DUELS, seed=0)
    return load_dataset(name, seed=0)


def load_builtin(choice: BuiltinChoice) -> state.LoadedData:
    """Load (cached) and describe a built-in dataset; raises the engine's errors."""
    data = _builtin_data(choice.name, choice.key == DEMO_KEY)
    return state.LoadedData(
        key=choice.key,
        title=choice.title,
        data=data,
        fingerprint=_fingerprint(data),
        source="builtin",
    )


def uploaded_csv(name: str, data: bytes, file_id: str) -> state.UploadedCsv:
    return state.UploadedCsv(name, data, hashlib.sha256(data).hexdigest(), file_id)


@st.cache_data(show_spinner=False, max_entries=16)
def _uploaded_data(
    items_digest: str, items_name: str, duels_digest: str, duels_name: str,
    _items: bytes, _duels: bytes,
) -> DuelData:  # fmt: skip
    # Keyed by the files' digests (hashed once, at upload) and names, not their bytes.
    # The user's own file names go into every error message (file, row, column).
    items_table = read_table(_items, file_name=items_name)
    duels_table = read_table(_duels, file_name=duels_name)
    return build_duel_data(
        items_table,
        duels_table,
        name=f"upload ({items_name} + {duels_name})",
        items_file=items_name,
        duels_file=duels_name,
    )


def upload_key(items: state.UploadedCsv, duels: state.UploadedCsv) -> str:
    return f"upload:{items.digest[:16]}{duels.digest[:16]}:{items.name}:{duels.name}"


def load_upload(items: state.UploadedCsv, duels: state.UploadedCsv) -> state.LoadedData:
    """Parse and validate an upload; raises DataValidationError naming file/row/column."""
    key = upload_key(items, duels)
    known = state.datasets().get(key)
    if known is not None:
        return known
    need = (len(items.data) + len(duels.data)) * budget.CSV_BYTES_PER_BYTE
    with budget.reserve(need, "Reading this upload", budget.UPLOAD_REDUCE):
        data = _uploaded_data(
            items.digest, items.name, duels.digest, duels.name, items.data, duels.data
        )
    return state.LoadedData(
        key=key,
        title=f"Upload: {items.name} + {duels.name}",
        data=data,
        fingerprint=_fingerprint(data),
        source="upload",
        files=(items.name, duels.name),
    )


def _fingerprint(data: DuelData) -> str:
    # Computed once per load and kept in LoadedData: every cache key starts with it.
    return workflow.data_fingerprint(data)


def sample_file(name: str) -> bytes:
    """A file of sample_data/ (the upload templates)."""
    return (SAMPLE_DIR / name).read_bytes()
