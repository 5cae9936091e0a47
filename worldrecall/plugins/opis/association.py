"""OPIS one-to-one association of inventory objects and detections in one window (A.7, errata 3).

Similarity in [0, 1] from the embedding (shifted cosine), the attributes and the category; a global
Hungarian assignment (``scipy.optimize.linear_sum_assignment``) with one "null" column per reference so a
reference may stay unmatched; per-reference margins flag ambiguous matches.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from worldrecall.plugins.opis.records import InventoryObject, Observation
from worldrecall.plugins.opis.thresholds import OpisThresholds

ATTRIBUTE_KEYS = ("color", "shape", "texture", "mark")


def raw_cosine(a: np.ndarray | Sequence[float] | None, b: np.ndarray | Sequence[float] | None) -> float | None:
    """Cosine of two vectors; None when either is missing/empty, the lengths differ, a norm is ~0 or a value
    is non-finite. Computed via the shifted cosine clipped to [0, 1] (as the released code), so the result
    lies in [-1, 1]."""
    if a is None or b is None:
        return None
    x = np.asarray(a, dtype=np.float64).reshape(-1)
    y = np.asarray(b, dtype=np.float64).reshape(-1)
    if x.size == 0 or x.size != y.size or not (np.isfinite(x).all() and np.isfinite(y).all()):
        return None
    nx, ny = float(np.linalg.norm(x)), float(np.linalg.norm(y))
    if nx <= 1e-12 or ny <= 1e-12:
        return None
    shifted = min(1.0, max(0.0, (float(np.dot(x, y)) / (nx * ny) + 1.0) / 2.0))
    return 2.0 * shifted - 1.0


def attribute_similarity(reference: Mapping[str, Any], observed: Mapping[str, Any],
                         keys: Sequence[str] = ATTRIBUTE_KEYS) -> float | None:
    """Mean over ``keys`` present (non-None) on both sides: numbers 1 - |d| / max(|ref|, 1) clipped to
    [0, 1]; anything else exact case-insensitive string equality (1 or 0). None if no key is shared."""
    scores: list[float] = []
    for key in keys:
        if reference.get(key) is None or observed.get(key) is None:
            continue
        r, o = reference[key], observed[key]
        numeric = isinstance(r, (int, float)) and isinstance(o, (int, float)) and not isinstance(r, bool) and not isinstance(o, bool)
        if numeric:
            scores.append(min(1.0, max(0.0, 1.0 - abs(float(o) - float(r)) / max(abs(float(r)), 1.0))))
        else:
            scores.append(1.0 if str(o).strip().lower() == str(r).strip().lower() else 0.0)
    return sum(scores) / len(scores) if scores else None


def category_similarity(reference: str | None, observed: str | None) -> float:
    """1 if equal (case-insensitive), 0 if different, 0.5 if either is empty."""
    if not reference or not observed:
        return 0.5
    return 1.0 if reference.strip().lower() == observed.strip().lower() else 0.0


def pair_similarity(reference: InventoryObject, observed: Observation, th: OpisThresholds) -> tuple[float, dict[str, Any]]:
    """Similarity of one reference and one observation (A.7), with its parts.

    score = (w_e e + w_a a + w_c c) / (sum of the weights of the present terms), e = (cos + 1) / 2.
    Hard zero when the raw cosine < ``min_embedding_cosine``, when there is neither embedding nor attribute
    evidence (category alone cannot match), or when an embedding holds non-finite values.
    """
    for v in (reference.embedding, observed.embedding):
        if v is not None and not np.isfinite(np.asarray(v, dtype=np.float64)).all():
            return 0.0, {"cosine": None, "attributes": None, "category": None, "reason": "non_finite_embedding"}
    cos = raw_cosine(reference.embedding, observed.embedding)
    attr = attribute_similarity(reference.attributes, observed.attributes)
    cat = category_similarity(reference.category, observed.category)
    total = th.weight_category * cat
    weight = th.weight_category
    if cos is not None:
        total += th.weight_embedding * (cos + 1.0) / 2.0
        weight += th.weight_embedding
    if attr is not None:
        total += th.weight_attributes * attr
        weight += th.weight_attributes
    score = min(1.0, max(0.0, total / weight)) if weight > 0 else 0.0
    parts = {"cosine": cos, "attributes": attr, "category": cat}
    if cos is not None and cos < th.min_embedding_cosine or cos is None and attr is None:
        score = 0.0
    return (score if math.isfinite(score) else 0.0), parts


def similarity_matrix(references: Sequence[InventoryObject], observations: Sequence[Observation],
                      th: OpisThresholds) -> np.ndarray:
    """[K, N] similarity of every reference to every observation (vectorised :func:`pair_similarity`)."""
    k, n = len(references), len(observations)
    if k == 0 or n == 0:
        return np.zeros((k, n), dtype=np.float64)

    def unit_rows(vs: Sequence[np.ndarray | None]) -> tuple[list[np.ndarray | None], np.ndarray, np.ndarray]:
        """Unit vectors (None where unusable), finite mask, usable mask."""
        units: list[np.ndarray | None] = []
        finite = np.ones(len(vs), bool)
        for idx, v in enumerate(vs):
            if v is None:
                units.append(None)
                continue
            a = np.asarray(v, dtype=np.float64).reshape(-1)
            if not np.isfinite(a).all():
                finite[idx] = False
                units.append(None)
                continue
            nrm = float(np.linalg.norm(a))
            units.append(a / nrm if a.size and nrm > 1e-12 else None)
        return units, finite, np.array([u is not None for u in units])

    ru, rfin, _ = unit_rows([r.embedding for r in references])
    ou, ofin, _ = unit_rows([o.embedding for o in observations])
    cos = np.full((k, n), np.nan)
    by_dim: dict[int, list[int]] = {}
    for j, u in enumerate(ou):
        if u is not None:
            by_dim.setdefault(u.size, []).append(j)
    for i, u in enumerate(ru):
        if u is None or u.size not in by_dim:
            continue
        cols = by_dim[u.size]
        mat = np.stack([ou[j] for j in cols])
        shifted = np.clip((mat @ u + 1.0) / 2.0, 0.0, 1.0)
        cos[i, cols] = 2.0 * shifted - 1.0
    has_cos = np.isfinite(cos)

    attr = np.full((k, n), np.nan)
    for i, r in enumerate(references):
        if not any(r.attributes.get(key) is not None for key in ATTRIBUTE_KEYS):
            continue
        for j, o in enumerate(observations):
            a = attribute_similarity(r.attributes, o.attributes)
            if a is not None:
                attr[i, j] = a
    has_attr = np.isfinite(attr)

    rc = np.array([(r.category or "").strip().lower() for r in references], dtype=object)
    oc = np.array([(o.category or "").strip().lower() for o in observations], dtype=object)
    empty = (rc == "")[:, None] | (oc == "")[None, :]
    cat = np.where(empty, 0.5, (rc[:, None] == oc[None, :]).astype(np.float64))

    total = th.weight_category * cat + np.where(has_cos, th.weight_embedding * (np.nan_to_num(cos) + 1.0) / 2.0, 0.0)
    total += np.where(has_attr, th.weight_attributes * np.nan_to_num(attr), 0.0)
    weight = th.weight_category + th.weight_embedding * has_cos + th.weight_attributes * has_attr
    score = np.clip(total / weight, 0.0, 1.0)
    score[has_cos & (cos < th.min_embedding_cosine)] = 0.0
    score[~has_cos & ~has_attr] = 0.0
    score[~rfin, :] = 0.0
    score[:, ~ofin] = 0.0
    return score


@dataclass
class Association:
    """Result of one window's association; ids refer to ``object_id`` / ``observed_id``."""

    pairs: dict[str, str]                         # object_id -> observed_id
    scores: dict[tuple[str, str], float]          # (object_id, observed_id) -> similarity
    margins: dict[str, float]
    ambiguous: set[str]
    unmatched_references: list[str]
    unmatched_observations: list[str]
    candidates: list[str] = field(default_factory=list)   # object ids that took part


def assign(similarity: np.ndarray, acceptance: float) -> dict[int, int]:
    """Hungarian assignment on cost 1 - similarity with one null column per row at cost 1 - acceptance.

    Returns row -> column for pairs on real columns whose similarity >= ``acceptance``.
    """
    s = np.asarray(similarity, dtype=np.float64)
    k, n = s.shape
    if k == 0 or n == 0:
        return {}
    cost = np.concatenate([1.0 - s, np.full((k, k), 1.0 - acceptance)], axis=1)
    from scipy.optimize import linear_sum_assignment  # here: a job that only re-scores never loads scipy

    rows, cols = linear_sum_assignment(cost)
    return {int(r): int(c) for r, c in zip(rows, cols) if c < n and s[r, c] >= acceptance}


def margins_of(similarity: np.ndarray, assignment: Mapping[int, int], acceptance: float) -> np.ndarray:
    """Per row: (assigned similarity, or ``acceptance`` if unassigned) - max(best other similarity,
    ``acceptance``). An unassigned row therefore always has margin <= 0 (errata 3)."""
    s = np.asarray(similarity, dtype=np.float64)
    out = np.zeros(s.shape[0])
    for i in range(s.shape[0]):
        j = assignment.get(i)
        chosen = s[i, j] if j is not None else acceptance
        others = [s[i, c] for c in range(s.shape[1]) if c != j]
        out[i] = chosen - max(others + [acceptance])
    return out


def associate(references: Sequence[InventoryObject], observations: Sequence[Observation],
              th: OpisThresholds) -> Association:
    """Associate the candidate references of a window with its detections (A.7).

    References and observations are processed in sorted id order (as the released code), so ties are
    broken deterministically. Default mode flags only matched references as ambiguous; parity mode also
    flags every unmatched one (errata 3). With no observations at all no reference is ambiguous.
    """
    refs = sorted(references, key=lambda r: r.object_id)
    obs = sorted(observations, key=lambda o: o.observed_id)
    if len({o.observed_id for o in obs}) != len(obs):
        raise ValueError("observed_id must be unique within a window")
    sim = similarity_matrix(refs, obs, th)
    chosen = assign(sim, th.acceptance)
    scores = {(r.object_id, o.observed_id): float(sim[i, j]) for i, r in enumerate(refs) for j, o in enumerate(obs)}
    pairs = {refs[i].object_id: obs[j].observed_id for i, j in chosen.items()}
    margins: dict[str, float] = {}
    ambiguous: set[str] = set()
    if obs:
        m = margins_of(sim, chosen, th.acceptance)
        for i, r in enumerate(refs):
            margins[r.object_id] = float(m[i])
            matched = i in chosen
            if m[i] < th.ambiguity_margin and (matched or th.official_parity):
                ambiguous.add(r.object_id)
    used = set(pairs.values())
    return Association(
        pairs=pairs, scores=scores, margins=margins, ambiguous=ambiguous,
        unmatched_references=[r.object_id for r in refs if r.object_id not in pairs],
        unmatched_observations=[o.observed_id for o in obs if o.observed_id not in used],
        candidates=[r.object_id for r in refs],
    )
