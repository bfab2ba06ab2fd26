"""What to train: the settings of one training run, and the model they make.

Both clients (CLI flags, dashboard form) fill a ``TrainSettings``; its fingerprint
(``workflow.fingerprints``) keys the model cache. The parameters, their defaults and
ranges are the spec table's (``models.params``); nothing here names one.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from prefshap_core.compute import Compute
from prefshap_core.models.estimators import PreferenceModel, make_model
from prefshap_core.models.params import ESTIMATOR_PARAMS, PARAMS, spec
from prefshap_core.solvers.options import SolverOptions


class TrainSettings:
    """What to train: the model ``kind`` and a checked mapping of every other parameter.

    ``TrainSettings(kind="cgpm", n_centres=500)``: parameters not given are at their
    defaults (``None``: chosen automatically); an unknown name or an invalid value is a
    ValueError naming it. Immutable and hashable; ``settings.params`` is the mapping
    and ``settings.<name>`` reads one parameter.
    """

    __slots__ = ("_kind", "_params")

    def __init__(self, kind: str | None = None, **params: Any) -> None:
        values = {s.name: s.default for s in PARAMS}
        values.update(params, kind=values["kind"] if kind is None else kind)
        checked = {name: spec(name).check(value) for name, value in values.items()}
        object.__setattr__(self, "_kind", checked.pop("kind"))
        object.__setattr__(self, "_params", MappingProxyType(checked))

    @classmethod
    def from_record(cls, values: Mapping[str, Any]) -> TrainSettings:
        """Settings from a stored ``as_dict()`` (a cache entry, a session record).

        Names this version does not know are left out (a record written by another
        version); parameters the record lacks are at their defaults.
        """
        known = {s.name for s in PARAMS}
        return cls(**{k: v for k, v in values.items() if k in known})

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def params(self) -> Mapping[str, Any]:
        """Every parameter but the kind, by name (a read-only view)."""
        return self._params

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not attributes: the parameters.
        if not name.startswith("_") and name in self._params:
            return self._params[name]
        raise AttributeError(f"{type(self).__name__} has no parameter {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("TrainSettings is immutable: use .replace(...)")

    def replace(self, **changes: Any) -> TrainSettings:
        """These settings with ``changes`` (checked like the constructor's)."""
        values = self.as_dict()
        values.update(changes)
        return TrainSettings(**values)

    def as_dict(self) -> dict[str, Any]:
        """The kind and every parameter, JSON-ready (tuples are JSON lists)."""
        return {"kind": self._kind, **self._params}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TrainSettings):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(tuple(self.as_dict().items()))

    def __repr__(self) -> str:
        given = ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items())
        return f"TrainSettings({given})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_from_dict, (self.as_dict(),))

    def model(
        self, kind: str | None = None, solver: SolverOptions | None = None
    ) -> PreferenceModel:
        """The unfitted estimator of ``kind`` (default: these settings' kind).

        Parameters that do not apply to that kind (a UPM has no utility weight) are
        left at their defaults.
        """
        kind = kind or self._kind
        params = {
            s.name: self._params[s.name] if kind in s.models else s.default
            for s in ESTIMATOR_PARAMS
        }
        compute = Compute(device=self._params["device"], dtype=self._params["dtype"])
        return make_model(kind, **params, compute=compute, solver=solver)


def _from_dict(values: dict[str, Any]) -> TrainSettings:
    return TrainSettings(**values)
