"""Train page: choose GPM / C-GPM / UPM, override hyperparameters, train with progress."""

from __future__ import annotations

import importlib.util
import json

import pandas as pd
import streamlit as st

from dashboard import pages, state
from dashboard.components.export import export_name, export_stem, model_download
from dashboard.components.guard import run_guarded
from dashboard.components.progress import job_outcome, job_panel
from dashboard.components.text import md
from dashboard.components.train_form import FormContext, form_rows, render_rows
from dashboard.services.explain_jobs import forget_job
from dashboard.services.training import cached_model, start_training, training_job_key
from prefshap_core.compute import default_compute
from prefshap_core.workflow.fingerprints import settings_fingerprint
from prefshap_core.workflow.settings import TrainSettings

MODELS = {
    "auto": (
        "Auto",
        "Fits the UPM, the GPM (and the C-GPM with context columns); keeps the best by "
        "validation log loss (K-fold CV on small data).",
    ),
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
    data = loaded.data
    context = FormContext(
        fingerprint=loaded.fingerprint,
        item_columns=data.item_space.feature_names,
        context_columns=None if data.context_space is None else data.context_space.feature_names,
        offered={
            "kind": ("auto", "cgpm", "gpm", "upm")
            if loaded.has_context
            else ("auto", "gpm", "upm"),
            "device": ("cpu",) + (("cuda",) if default_compute().device == "cuda" else ()),
            # The optional falkon package is offered only where it is installed.
            "backend": ("torch",) + (("falkon",) if importlib.util.find_spec("falkon") else ()),
        },
    )
    kinds = context.offered["kind"]
    model_widget = {
        "format_func": lambda k: MODELS[k][0],
        "captions": [MODELS[k][1] for k in kinds],
    }
    values = render_rows(form_rows(context, "basic"), {"kind": model_widget})
    if not loaded.has_context:
        st.caption("C-GPM needs context columns in the duels table; this dataset has none.")
    with st.expander("Advanced: override the automatic hyperparameters"):
        st.caption("Empty fields are chosen automatically on the validation split.")
        values.update(render_rows(form_rows(context, "advanced", values["kind"])))
    return TrainSettings(**values)


# AUC differences below this are not a difference: the test split's sampling error
# (a few hundred duels) is larger.
SAME_AUC = 0.01
# Fewer training duels per item than this is a sparse comparison graph: SpecR is then
# low because few items meet twice, not because of cycles.
SPARSE_DUELS_PER_ITEM = 10.0


def _specr_sentence(
    specr: float,
    auc: float,
    upm_auc: float | None,
    *,
    kind: str = "GPM",
    duels_per_item: float | None = None,
) -> str:
    """What the rankability of the training duels means here, in one or two sentences.

    Honest on purpose: never advises more centres when the UPM is as good (then one
    score per item is the answer); a C-GPM's gain over the UPM is said to be possibly
    the context's; a low SpecR on a sparse comparison graph is said to be the graph's.
    """
    sparse = duels_per_item is not None and duels_per_item < SPARSE_DUELS_PER_ITEM
    if specr >= 0.6:
        reading = (
            f"SpecR {specr:.2f} is high: these duels line up into nearly one ranking, so "
            "a single score per item (UPM) should explain most outcomes."
        )
    elif sparse:
        reading = (
            f"SpecR {specr:.2f} is low, but each item took part in only "
            f"{duels_per_item:.1f} training duels on average: on so sparse a comparison "
            "graph SpecR is low whether or not there are cycles, so it says little here; "
            "compare the models instead."
        )
    elif specr >= 0.3:
        reading = (
            f"SpecR {specr:.2f} is moderate: a ranking explains part of these duels; who "
            "meets whom may matter too, which a GPM can learn and a UPM cannot."
        )
    else:
        reading = (
            f"SpecR {specr:.2f} is low: these duels do not line up into one ranking "
            "(cycles or matchup effects would do that; the Intransitivity page shows "
            "whether the model finds cycles that are more than noise)."
        )
    if upm_auc is None:
        return reading
    if kind == "UPM":
        return reading
    if auc < upm_auc - SAME_AUC:
        verdict = (
            f"The UPM does better here (ROC AUC {upm_auc:.2f} against {auc:.2f}): one "
            "score per item explains these duels; prefer the UPM."
        )
    elif auc <= upm_auc + SAME_AUC:
        verdict = (
            f"The UPM does as well here (ROC AUC {upm_auc:.2f} against {auc:.2f}): one "
            f"score per item explains these duels; the {kind} adds nothing the data show."
        )
    elif kind == "C-GPM":
        verdict = (
            f"The C-GPM beats the UPM (ROC AUC {auc:.2f} against {upm_auc:.2f}); it also "
            "sees the context, which the UPM does not, so the gain may be the context's "
            "rather than matchups or cycles."
        )
    else:
        verdict = (
            f"The {kind} beats the UPM (ROC AUC {auc:.2f} against {upm_auc:.2f}): who "
            "meets whom matters beyond one score per item."
        )
    return f"{reading} {verdict}"


def _summary_facts(loaded: state.LoadedData, model: state.TrainedModel, kind: str) -> dict:
    """The model's name and the comparison graph's density for :func:`_specr_sentence`."""
    n_items = max(loaded.data.n_items, 1)
    return {"kind": kind, "duels_per_item": 2 * len(model.split.train) / n_items}


def _headline(result, kind: str) -> tuple[str, str, str | None, str]:
    """(label, value, "vs UPM" delta, the UPM's value): the K-fold CV ROC AUC with its
    sd on small data (a handful of test duels ranks nothing), else the test ROC AUC;
    the delta compares the same metric."""
    upm = result.baseline_metrics
    if result.cv is not None:
        cv, upm_cv = result.cv, result.baseline_cv
        value = f"{cv['roc_auc_mean']:.3f} ± {cv['roc_auc_sd']:.3f}"
        delta = None
        upm_value = "—"
        if upm_cv is not None:
            delta = f"{cv['roc_auc_mean'] - upm_cv['roc_auc_mean']:+.3f} vs UPM (CV)"
            upm_value = f"{upm_cv['roc_auc_mean']:.3f} ± {upm_cv['roc_auc_sd']:.3f}"
        return f"{kind} ROC AUC ({cv['folds']}-fold CV)", value, delta, upm_value
    test = result.metrics["test"]
    delta = None if upm is None else f"{test['roc_auc'] - upm['roc_auc']:+.3f} vs UPM"
    upm_value = "—" if upm is None else f"{upm['roc_auc']:.3f}"
    return f"{kind} ROC AUC (test)", f"{test['roc_auc']:.3f}", delta, upm_value


def _candidates_table(result) -> pd.DataFrame | None:
    """Every candidate's held-out numbers (under auto), or None for one explicit kind."""
    candidates = result.candidates
    if len(candidates) < 2:
        return None
    rows = {
        MODELS[c["model"]][0] + (" (chosen)" if c["model"] == result.kind else ""): {
            "Validation log loss": c["validation_log_loss"],
            "ROC AUC (test)": c["test_roc_auc"],
            "ROC AUC (K-fold CV)": c["cv_roc_auc"],
            "Seconds": c["seconds"],
        }
        for c in candidates
    }
    return pd.DataFrame(rows).T


def _results(loaded: state.LoadedData, model: state.TrainedModel) -> None:
    result = model.result
    kind = MODELS[model.kind][0]
    test = result.metrics["test"]
    upm = result.baseline_metrics
    source = "loaded from the cache" if model.from_cache else f"{result.seconds['total']:.1f} s"
    st.subheader(f"{kind} on {md(loaded.title)}")
    st.caption(
        f"Held-out test split: {len(model.split.test):,} duels (trained on "
        f"{len(model.split.train):,}, tuned on {len(model.split.validation):,}) · {source}"
    )
    choice = result.model_choice
    if choice.get("requested") == "auto":
        st.markdown(f"**Chosen automatically** — {md(choice['reason'])} (lower is better).")
    label, value, delta, upm_value = _headline(result, kind)
    c = st.columns(4)
    c[0].metric(label, value, delta=delta)
    c[1].metric(label.replace(kind, "UPM", 1), upm_value)
    c[2].metric(f"{kind} accuracy (test)", f"{test['accuracy']:.3f}")
    c[3].metric("SpecR (rankability)", f"{result.rankability:.2f}")
    cv, upm_cv = result.cv, result.baseline_cv
    st.markdown(
        _specr_sentence(
            result.rankability,
            test["roc_auc"] if cv is None else cv["roc_auc_mean"],
            None
            if upm is None
            else (upm["roc_auc"] if cv is None or upm_cv is None else upm_cv["roc_auc_mean"]),
            **_summary_facts(loaded, model, kind),
        )
    )
    candidates = _candidates_table(result)
    if candidates is not None:
        st.caption("Every candidate, on the same split:")
        st.dataframe(candidates, width="stretch")
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
        meta = model.function.metadata
        st.json(
            {
                "lengthscale_scale": meta.get("lengthscale_scale"),
                "penalty": meta.get("penalty"),
                "utility_weight": meta.get("utility_weight"),
                "lengthscale_factors": meta.get("lengthscale_factors"),
                "context_lengthscale_factors": meta.get("context_lengthscale_factors"),
                "n_centres": model.function.n_centres,
                "seconds": result.seconds,
            }
        )
    stem = export_stem(loaded.data.name, "model", f"{model.kind} seed {model.settings.seed}")
    c = st.columns([1, 1, 3])
    with c[0]:
        model_download(model.function, stem, key=model.settings_fp)
    c[1].download_button(
        "Metrics (.json)",
        data=lambda: json.dumps(result.to_json(), indent=2, default=str),
        file_name=export_name(
            loaded.data.name, "metrics", f"{model.kind} seed {model.settings.seed}", "json"
        ),
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
        st.page_link(pages.DATA.page(), label="Go to Data")
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
