"""A sum-kernel model's g split into its utility and its intransitive part.

With the kernel ``k_E + w k_UPM`` (times ``k_U`` for a C-GPM), g is linear in the two
brackets, so ``g = utility + intransitive``: the utility part is a difference
``f(x_l) - f(x_r)`` (transitive: it alone would rank the items), the intransitive
part is the GPM bracket's, the part no ranking can express. A UPM is all utility; a
plain GPM (``w = 0``) has no utility part. Made by
:meth:`PreferenceFunction.decision_parts` and its pool / data forms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class DecisionParts:
    utility: np.ndarray  # (q,) w sum_j alpha_j (k_U) [utility bracket]: f(x_l) - f(x_r)
    intransitive: np.ndarray  # (q,) sum_j alpha_j (k_U) [GPM bracket]

    def __post_init__(self) -> None:
        if np.shape(self.utility) != np.shape(self.intransitive):
            raise ValueError("the utility and intransitive parts disagree in shape")

    def __len__(self) -> int:
        return len(self.utility)

    @property
    def total(self) -> np.ndarray:
        """g itself (equal to ``decision`` up to rounding)."""
        return self.utility + self.intransitive

    def swapped(self) -> DecisionParts:
        """The same duels with their sides swapped: both parts are antisymmetric."""
        return DecisionParts(-self.utility, -self.intransitive)

    def mean_sizes(self) -> tuple[float, float]:
        """(mean |utility|, mean |intransitive|) over the duels (0 for none)."""
        if not len(self):
            return 0.0, 0.0
        return float(np.mean(np.abs(self.utility))), float(np.mean(np.abs(self.intransitive)))

    def utility_share(self) -> float:
        """mean |utility| / (mean |utility| + mean |intransitive|); NaN if both are 0.

        How much of g's size over these duels the transitive part carries (1: a
        utility model, 0: none of it).
        """
        u, i = self.mean_sizes()
        return u / (u + i) if u + i > 0 else float("nan")
