"""The Train page's SpecR / "vs UPM" sentence: honest rules, also on sparse graphs."""

from __future__ import annotations

import pytest

from dashboard.views.train import _specr_sentence


@pytest.mark.parametrize("specr", [0.1, 0.45, 0.8])
@pytest.mark.parametrize("upm_auc", [0.70, 0.705, 0.75])
def test_never_advises_more_centres_when_the_upm_is_as_good(specr, upm_auc):
    text = _specr_sentence(specr, 0.70, upm_auc, kind="GPM", duels_per_item=40.0)
    assert "centres" not in text and "hyperparameters" not in text
    assert "prefer the UPM" in text or "adds nothing" in text


def test_a_cgpm_gain_is_said_to_be_possibly_the_contexts():
    text = _specr_sentence(0.2, 0.80, 0.70, kind="C-GPM", duels_per_item=40.0)
    assert "C-GPM beats the UPM" in text and "context" in text
    gpm = _specr_sentence(0.2, 0.80, 0.70, kind="GPM", duels_per_item=40.0)
    assert "GPM beats the UPM" in gpm and "context" not in gpm


def test_low_specr_on_a_sparse_graph_is_not_called_cycles():
    sparse = _specr_sentence(0.05, 0.70, 0.70, kind="GPM", duels_per_item=3.0)
    assert "sparse" in sparse and "3.0" in sparse and "do not line up" not in sparse
    dense = _specr_sentence(0.05, 0.70, 0.70, kind="GPM", duels_per_item=50.0)
    assert "do not line up" in dense and "sparse" not in dense


def test_without_a_baseline_or_for_a_upm_there_is_no_verdict():
    assert "UPM does" not in _specr_sentence(0.5, 0.7, None)
    assert "beats" not in _specr_sentence(0.5, 0.7, 0.6, kind="UPM")
