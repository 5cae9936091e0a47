"""Every constant and switch of OPIS scoring (A.6–A.12), as plain JSON values.

``DEFAULT_THRESHOLDS`` is what the OPIS metric takes as its ``thresholds``; a Hydra override of any key
re-scores archived measurements without running a model. :func:`resolve` merges overrides, refuses unknown
keys and wrong types, and returns an :class:`OpisThresholds`.

Modes
-----
``official_parity=False`` (default): the spec's recommendations (A.15) plus our fixes of the released
code's surprises listed in the errata. ``official_parity=True``: the released V3 evaluator's behaviour,
errata included. What parity changes, in one place:

* composite: geometric weighted mean of (P, I, shrunk S) instead of the arithmetic mean of (P, I,
  coverage-adjusted S); ``coverage_denominator`` = ``all_windows`` (O-A1, O-A2, O-A5);
* errata 3: an unmatched reference is flagged ambiguous (margin <= 0); default: only matched rows carry
  the flag;
* errata 4: a matched static object whose geometry fails keeps state ``evaluator_failure`` (presence 1);
  default: state ``geometry_unavailable``; presence is read from the value in both modes;
* errata 5: the detection of an object removed from matching (pre-match outside_view / occluded /
  too_small) is a confirmed extra; default: an unassigned detection that the removed object would have
  accepted (similarity >= ``acceptance``) is attributed to it and not counted as an extra;
* errata 6: pose coverage divides by the number of valid reference edges; default: by the template's
  edge count;
* errata 7: the pose -> VLM fallback runs only for rows with a stored pose measurement; default: for any
  dynamic row whose pose route gives no value;
* A.14: a static object with no reference queries (no projection stored in a scored frame) gets no static
  geometry by default; the released code still scores it from its instance correspondences when matched;
* the released code feeds the shrunk Structure into the composite and reports all structure variants.
The explicit switches below (``composite``, ``structure_in_composite``, ``coverage_denominator``) are
overridden by parity mode; set them individually with parity off to mix.

Ablations (our precise definitions; the paper's ablation text was not available)
-------------------------------------------------------------------------------
``ablation_no_structural_threshold``: structure rows are valued without their evidence gates — a static
row needs 1 instance correspondence instead of ``min_instance_correspondences``; a pose row needs 1 shared
edge and no minimum coverage; a VLM row keeps every claim and every known judgment whatever its
confidence. Values themselves (exp scales) are unchanged.
``ablation_no_coverage_multiplier``: the headline Structure is the raw mean (per object: mean of its valid
rows; then mean over objects with >= 1 valid row) instead of the coverage-adjusted one, i.e. the factor
n_k / N_k is dropped; also in the composite.
``ablation_min_instead_of_mean``: per object, the temporal mean over windows is replaced by the minimum,
for Identity (min over matched windows) and Structure (min over valid rows; coverage-adjusted =
n_k/N_k x min, shrunk = (n_k x min + strength x prior) / (n_k + strength)). Presence is unchanged (strict
frame presence is already a minimum over objects).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

COMPOSITES = ("arithmetic", "geometric")
STRUCTURE_CHOICES = ("coverage", "shrunk", "raw")
COVERAGE_DENOMINATORS = ("eligible", "all_windows")


@dataclass(frozen=True)
class OpisThresholds:
    """All OPIS scoring constants (defaults = the released code's values) and switches."""

    # --- A.6 visibility from projected reference queries
    camera_confidence_min: float = 0.65       # below -> unreliable_camera_pose
    min_projection_queries: int = 4           # fewer queries -> no projection evidence
    visible_fraction_min: float = 0.30        # in-view share (outside_view) and visible share (occluded)
    min_observable_area_px: float = 16.0      # px^2, projected hull or clipped observed bbox (too_small)
    depth_coverage_min: float = 0.70          # share of in-view points with valid depth
    depth_confidence_min: float = 0.65        # errata 2: a query point's depth also needs this confidence
    occlusion_tolerance: float = 0.05         # occluded if current < projected x (1 - tol)
    occluded_fraction_min: float = 0.70       # occluded share of valid points for state occluded
    # --- A.7 association
    weight_embedding: float = 0.65
    weight_attributes: float = 0.25
    weight_category: float = 0.10
    acceptance: float = 0.35                  # min similarity of an accepted pair; null column cost 1 - this
    ambiguity_margin: float = 0.05            # margin below this -> ambiguous
    min_embedding_cosine: float = 0.05        # raw cosine below this -> similarity 0
    # --- A.11.1 static projective preservation
    min_instance_correspondences: int = 4
    geometry_error_scale: float = 0.05        # g = exp(-eps / scale)
    # --- A.11.2 dynamic structure
    pose_residual_scale: float = 0.2          # exp(-r / scale)
    pose_min_edges: int = 3
    pose_min_coverage: float = 0.5
    vlm_claim_confidence_min: float = 0.7     # reference claims kept
    vlm_judgment_confidence_min: float = 0.7  # judgments used
    vlm_fallback: bool = True                 # pose -> VLM fallback for pose-routed objects
    # --- A.11.3 structure aggregation
    shrink_prior_mean: float = 0.5
    shrink_prior_strength: float = 2.0
    # --- A.12 composite
    weight_presence: float = 0.2
    weight_identity: float = 0.4
    weight_structure: float = 0.4
    pi_only_weight_presence: float = 0.2      # O-A4 fallback when S is undefined
    pi_only_weight_identity: float = 0.8
    # --- switches
    official_parity: bool = False
    composite: str = "arithmetic"             # O-A1: "arithmetic" (paper/README) | "geometric" (code)
    structure_in_composite: str = "coverage"  # O-A2: "coverage" | "shrunk" (code) | "raw"
    coverage_denominator: str = "eligible"    # O-A5: "eligible" (ours) | "all_windows" (code)
    dynamic_projection_presence: bool = False  # O-A3 flagged variant (see visibility.py)
    structure_enabled: bool = True
    allow_unlabeled_geometry: bool = False     # errata 1 (inventory parsing)
    ablation_no_structural_threshold: bool = False
    ablation_no_coverage_multiplier: bool = False
    ablation_min_instead_of_mean: bool = False

    # ------------------------------------------------------------------ effective values (parity aware)
    @property
    def effective_composite(self) -> str:
        """Composite form after the parity switch."""
        return "geometric" if self.official_parity else self.composite

    @property
    def effective_structure_in_composite(self) -> str:
        """Structure variant entering the composite after parity and ablation switches."""
        if self.official_parity:
            return "shrunk"
        if self.ablation_no_coverage_multiplier and self.structure_in_composite == "coverage":
            return "raw"
        return self.structure_in_composite

    @property
    def effective_coverage_denominator(self) -> str:
        """O-A5 denominator after the parity switch."""
        return "all_windows" if self.official_parity else self.coverage_denominator

    def validate(self) -> OpisThresholds:
        """Raise ``ValueError`` (one line) on an impossible value."""
        if self.composite not in COMPOSITES:
            raise ValueError(f"opis thresholds: composite {self.composite!r} not in {COMPOSITES}")
        if self.structure_in_composite not in STRUCTURE_CHOICES:
            raise ValueError(f"opis thresholds: structure_in_composite {self.structure_in_composite!r} not in {STRUCTURE_CHOICES}")
        if self.coverage_denominator not in COVERAGE_DENOMINATORS:
            raise ValueError(f"opis thresholds: coverage_denominator {self.coverage_denominator!r} not in {COVERAGE_DENOMINATORS}")
        weights = (self.weight_presence, self.weight_identity, self.weight_structure)
        if min(weights) < 0 or abs(sum(weights) - 1.0) > 1e-6:
            raise ValueError(f"opis thresholds: composite weights {weights} must be >= 0 and sum to 1")
        if abs(self.pi_only_weight_presence + self.pi_only_weight_identity - 1.0) > 1e-6:
            raise ValueError("opis thresholds: pi_only weights must sum to 1")
        if not 0 < self.acceptance < 1:
            raise ValueError(f"opis thresholds: acceptance {self.acceptance} not in (0, 1)")
        for name in ("geometry_error_scale", "pose_residual_scale", "shrink_prior_strength"):
            if getattr(self, name) <= 0:
                raise ValueError(f"opis thresholds: {name} must be > 0")
        return self


#: Plain-JSON defaults (what the Metric class declares as its ``thresholds``).
DEFAULT_THRESHOLDS: dict[str, Any] = asdict(OpisThresholds())


def resolve(overrides: Mapping[str, Any] | OpisThresholds | None = None) -> OpisThresholds:
    """Defaults merged with ``overrides``; unknown keys or wrong types raise ``ValueError`` naming the key.

    Keys not belonging to OPIS scoring may be present in a Metric's thresholds mapping only if they are
    prefixed with ``_`` (ignored).
    """
    if isinstance(overrides, OpisThresholds):
        return overrides.validate()
    base = OpisThresholds()
    if not overrides:
        return base
    types = {f.name: type(getattr(base, f.name)) for f in fields(OpisThresholds)}
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        if str(key).startswith("_"):
            continue
        if key not in types:
            raise ValueError(f"opis thresholds: unknown key {key!r}")
        want = types[key]
        if want is bool:
            if not isinstance(value, bool):
                raise ValueError(f"opis thresholds: {key} must be a bool, got {value!r}")
        elif want is int:
            if isinstance(value, bool) or not isinstance(value, int):
                if isinstance(value, float) and value.is_integer():
                    value = int(value)
                else:
                    raise ValueError(f"opis thresholds: {key} must be an int, got {value!r}")
        elif want is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"opis thresholds: {key} must be a number, got {value!r}")
            value = float(value)
        elif want is str and not isinstance(value, str):
            raise ValueError(f"opis thresholds: {key} must be a string, got {value!r}")
        changes[key] = value
    return replace(base, **changes).validate()
