"""Train page: choose GPM / C-GPM / UPM, override hyperparameters, train with progress."""

from __future__ import annotations

import importlib.util
import json
import math

import pandas as pd
import streamlit as st

from dashboard import state
from dashboard.components.export import file_stem, model_download
from dashboard.components.guard import run_guarded
from dashboard.components.progress import job_outcome, job_panel
from dashboard.components.text import md
from dashboard.services.explain_jobs import forget_job
from dashboard.services.training import cached_model, start_training, training_job_key
from prefshap_core.compute import default_compute
from prefshap_core.workflow import TrainSettings, settings_fingerprint

MODELS = {
    "gpm": (
        "GPM",
        "Generalised preferential model: learns who beats whom, matchups and cycles included.",
    ),
    "cgpm": (
        "C-GPM",
        "GPM whose preferences change with the duel's context (e.g. court surface).",
    ),
    "upm": (
        "UPM",
        "Utility model (Bradley-Terry-like): one score per item, the higher score wins.",
    ),
}
METRIC_NAMES = {
    "roc_auc": "ROC AUC",
    "accuracy": "Accuracy",
    "balanced_accuracy": "Balanced accuracy",
    "log_loss": "Log loss",
}


def _settings_form(loaded: state.LoadedData) -> TrainSettings:
    fp = loaded.fingerprint
    kinds = ["cgpm", "gpm", "upm"] if loaded.has_context else ["gpm", "upm"]
    kind = st.radio(
        "Model",
        kinds,
        format_func=lambda k: MODELS[k][0],
        horizontal=True,
        key=f"train:kind:{fp}",
        persist_state=state.PERSIST,
        captions=[MODELS[k][1] for k in kinds],
    )
    if not loaded.has_context:
        st.caption("C-GPM needs context columns in the duels table; this dataset has none.")
    auto = "automatic"
    with st.expander("Advanced: override the automatic hyperparameters"):
        st.caption("Empty fields are chosen automatically on the validation split.")
        c = st.columns(3)
        seed = c[0].number_input(
            "Seed (split, centres)", min_value=0, value=0, step=1, key="train:seed",
            persist_state=state.PERSIST,
        )  # fmt: skip
        n_centres = c[1].number_input(
            "Nyström centres", min_value=10, max_value=50_000, value=2000, step=100,
            key="train:centres", persist_state=state.PERSIST,
            help="More centres: a more flexible model, slower training and explanations.",
        )  # fmt: skip
        loss = c[2].selectbox(
            "Loss", ["logistic", "squared"], key="train:loss", persist_state=state.PERSIST
        )
        c = st.columns(3)
        lengthscale_scale = c[0].number_input(
            "Lengthscale scale", min_value=1e-3, value=None, placeholder=auto, format="%g",
            key="train:ls", persist_state=state.PERSIST,
            help="Multiplies the median-heuristic lengthscales of every feature.",
        )  # fmt: skip
        penalty = c[1].number_input(
            "Penalty (λ)", min_value=1e-12, value=None, placeholder=auto, format="%g",
            key="train:penalty", persist_state=state.PERSIST,
        )  # fmt: skip
        cme_lambda = c[2].number_input(
            "CME regulariser (explanations)", min_value=1e-12, value=None, placeholder=auto,
            format="%g", key="train:cme", persist_state=state.PERSIST,
        )  # fmt: skip
        c = st.columns(3)
        utility_weight = None
        if kind != "upm":
            utility_weight = c[0].number_input(
                "Utility weight (w)", min_value=0.0, value=None, placeholder=auto, format="%g",
                key="train:utility_weight", persist_state=state.PERSIST,
                help="Kernel k_E + w k_UPM: the generalised part plus w times a utility "
                "model. 0: the plain GPM; empty: chosen on validation.",
            )  # fmt: skip
            with c[1]:
                utility_weights = _numbers_input(
                    "Utility weights to search", "train:utility_weights", "0, 1, 10, 100, 1000",
                    allow_zero=True,
                )  # fmt: skip
        else:
            utility_weights = None
        with c[2]:
            lengthscale_scales = _numbers_input(
                "Lengthscale scales to search", "train:ls_scales",
                "sqrt(groups) x 0.25, 0.5, 1, 2, 4", allow_zero=False,
            )  # fmt: skip
        lengthscales = _lengthscales_input(
            "Item lengthscales", loaded.data.item_space.feature_names, f"train:lengthscales:{fp}"
        )
        refine = st.checkbox(
            "Refine each feature group's lengthscales", value=True, key="train:refine",
            persist_state=state.PERSIST,
            help="After the grid search, double or halve one group's lengthscales at a time "
            "while the validation loss falls (a deciding feature gets a short lengthscale, "
            "noise a long one). Not done for fixed item lengthscales or small data "
            "(K-fold selection).",
        )  # fmt: skip
        context_lengthscales = context_cme_lambda = None
        if loaded.has_context and kind == "cgpm":
            assert loaded.data.context_space is not None
            c = st.columns([2, 1])
            with c[0]:
                context_lengthscales = _lengthscales_input(
                    "Context lengthscales", loaded.data.context_space.feature_names,
                    f"train:context_lengthscales:{fp}",
                )  # fmt: skip
            context_cme_lambda = c[1].number_input(
                "Context CME regulariser", min_value=1e-12, value=None, placeholder=auto,
                format="%g", key="train:context_cme", persist_state=state.PERSIST,
            )  # fmt: skip
        c = st.columns(4)
        dtype = c[0].selectbox(
            "Precision", ["float64", "float32"], key="train:dtype", persist_state=state.PERSIST
        )
        devices = ["cpu"] + (["cuda"] if default_compute().device == "cuda" else [])
        device = c[1].selectbox("Device", devices, key="train:device", persist_state=state.PERSIST)
        # The optional falkon package is offered only where it is installed.
        backends = ["torch"] + (["falkon"] if importlib.util.find_spec("falkon") else [])
        backend = c[2].selectbox(
            "Solver", backends, key="train:backend", persist_state=state.PERSIST,
            help="torch: the built-in FALKON-style solver; falkon: the optional package.",
        )  # fmt: skip
        baseline = c[3].checkbox(
            "Also fit a UPM baseline", value=True, key="train:baseline",
            persist_state=state.PERSIST,
        )  # fmt: skip
    return TrainSettings(
        kind=kind,
        seed=int(seed),
        n_centres=int(n_centres),
        lengthscales=lengthscales,
        lengthscale_scale=lengthscale_scale,
        lengthscale_scales=lengthscale_scales,
        utility_weight=utility_weight,
        utility_weights=utility_weights,
        refine_lengthscales=bool(refine),
        context_lengthscales=context_lengthscales,
        context_cme_lambda=context_cme_lambda,
        penalty=penalty,
        loss=loss,
        cme_lambda=cme_lambda,
        dtype=dtype,
        device=device,
        backend=backend,
        baseline=bool(baseline),
    )


def _numbers_input(
    label: str, key: str, placeholder: str, *, allow_zero: bool
) -> tuple[float, ...] | None:
    """An optional comma-separated grid; a wrong entry is named and not used."""
    text = st.text_input(
        label, placeholder=f"automatic ({placeholder})", key=key, persist_state=state.PERSIST
    ).strip()
    if not text:
        return None
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    low_ok = all((v >= 0) if allow_zero else (v > 0) for v in values)
    if not values or not low_ok or not all(math.isfinite(v) for v in values):
        bound = ">= 0" if allow_zero else "> 0"
        st.error(f"{label}: give comma-separated numbers {bound}; using the automatic grid.")
        return None
    return values


def _lengthscales_input(label: str, columns: tuple[str, ...], key: str) -> tuple[float, ...] | None:
    """Optional per-column lengthscales; a wrong entry is named and not used."""
    text = st.text_input(
        f"{label} ({len(columns)}, comma-separated)",
        placeholder="automatic (median heuristic x scale)",
        key=key,
        persist_state=state.PERSIST,
        help="In model space (standardised columns), in this order: "
        + ", ".join(md(c) for c in columns),
    ).strip()
    if not text:
        return None
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        st.error(f"{label}: not a comma-separated list of numbers; using automatic ones.")
        return None
    if len(values) != len(columns) or min(values) <= 0:
        st.error(
            f"{label}: give {len(columns)} positive numbers (one per column: "
            f"{', '.join(md(c) for c in columns)}); got {len(values)}. Using automatic ones."
        )
        return None
    return values


def _specr_sentence(specr: float, auc: float, upm_auc: float | None) -> str:
    """What the rankability of the training duels means here, in one sentence."""
    if upm_auc is None:
        gap = ""
    elif auc >= upm_auc:
        gap = f" (here ROC AUC {auc:.2f} against UPM's {upm_auc:.2f})"
    else:
        gap = (
            f"; here UPM does better ({upm_auc:.2f} against {auc:.2f}): try more centres or "
            "other hyperparameters"
        )
    if specr >= 0.6:
        return (
            f"SpecR {specr:.2f} is high: these duels line up into nearly one ranking, so "
            f"a single score per item (UPM) should explain most outcomes{gap}."
        )
    if specr >= 0.3:
        return (
            f"SpecR {specr:.2f} is moderate: a ranking explains part of these duels, but who "
            f"meets whom matters too, which a GPM can learn and a UPM cannot{gap}."
        )
    return (
        f"SpecR {specr:.2f} is low: these duels do not line up into one ranking (cycles, "
        f"matchup effects), which is where a GPM can beat a utility model{gap}."
    )


def _results(loaded: state.LoadedData, model: state.TrainedModel) -> None:
    result = model.result
    kind = MODELS[model.kind][0]
    test = result.metrics["test"]
    upm = result.baseline_metrics
    source = "loaded from the cache" if model.from_cache else f"{result.seconds['total']:.1f} s"
    st.subheader(f"{kind} on {md(loaded.title)}")
    st.caption(
        f"Held-out test split: {len(result.split.test):,} duels (trained on "
        f"{len(result.split.train):,}, tuned on {len(result.split.validation):,}) · {source}"
    )
    c = st.columns(4)
    c[0].metric(
        f"{kind} ROC AUC (test)",
        f"{test['roc_auc']:.3f}",
        delta=None if upm is None else f"{test['roc_auc'] - upm['roc_auc']:+.3f} vs UPM",
    )
    c[1].metric("UPM ROC AUC (test)", "—" if upm is None else f"{upm['roc_auc']:.3f}")
    c[2].metric(f"{kind} accuracy (test)", f"{test['accuracy']:.3f}")
    c[3].metric("SpecR (rankability)", f"{result.rankability:.2f}")
    st.markdown(
        _specr_sentence(
            result.rankability,
            test["roc_auc"],
            None if upm is None else upm["roc_auc"],
        )
    )
    if result.rankability_items < loaded.data.n_items:
        st.caption(
            f"SpecR measured on the {result.rankability_items:,} most active items "
            "(the training duels' dominance graph)."
        )
    rows = {f"{kind} test": test, f"{kind} validation": result.metrics["validation"]}
    if upm is not None:
        rows["UPM test"] = upm
    table = pd.DataFrame(rows).T.rename(columns=METRIC_NAMES)
    with st.expander("All metrics and the chosen hyperparameters"):
        st.dataframe(table, width="stretch")
        meta = result.function.metadata
        st.json(
            {
                "lengthscale_scale": meta.get("lengthscale_scale"),
                "penalty": meta.get("penalty"),
                "utility_weight": meta.get("utility_weight"),
                "lengthscale_factors": meta.get("lengthscale_factors"),
                "context_lengthscale_factors": meta.get("context_lengthscale_factors"),
                "n_centres": result.function.n_centres,
                "seconds": result.seconds,
            }
        )
    stem = file_stem(loaded.data.name, model.kind, f"seed{result.settings.seed}")
    c = st.columns([1, 1, 3])
    with c[0]:
        model_download(result.function, stem, key=model.settings_fp)
    c[1].download_button(
        "Metrics (.json)",
        data=lambda: json.dumps(result.to_json(), indent=2, default=str),
        file_name=f"{stem}_metrics.json",
        mime="application/json",
        on_click="ignore",
        key=f"metrics:{model.settings_fp}",
        icon=":material/data_object:",
    )


def render() -> None:
    st.title("Train")
    loaded = state.active()
    if loaded is None:
        st.info("Choose or upload a dataset first.")
        st.page_link("views/data.py", label="Go to Data", icon=":material/table_view:")
        return
    st.caption(f"Dataset: **{md(loaded.title)}** · {loaded.data.n_duels:,} duels")
    settings = _settings_form(loaded)
    job = state.job(training_job_key(loaded))
    running = job is not None and not job.finished
    if st.button("Train", type="primary", disabled=running, icon=":material/play_arrow:"):
        cached = cached_model(loaded, settings_fingerprint(settings))
        if cached is not None:
            state.set_model(cached)
            forget_job(training_job_key(loaded))
            st.toast("Same data and settings as an earlier run: loaded from the cache.")
        else:
            job = start_training(loaded, settings)
            running = True
    if running and job is not None:
        job_panel(job)
    elif job is not None:
        job_outcome(job, what="Training")
    model = state.model_for(loaded)
    if model is None:
        if not running:
            st.info("No model on this dataset yet: press Train.")
        return
    if running:
        st.caption("Until the new model is ready, the pages use the previous one below.")
    _results(loaded, model)


run_guarded(render)
