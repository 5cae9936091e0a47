"""The two Scene-Memory-F1 metrics: official ``memory_scene_f1`` and experimental ``scene_f1``.

Measure (cached): build the observation and revisit clouds from the sidecar (B.6) — or take the case's
precomputed clouds — and copy the aligner's gate facts; per-leg clouds for multi-loop programs (O-B3).
Score (pure): the shared kernel (B.7) under the thresholds, then the variant's gate semantics:

* ``memory_scene_f1``: a failed return gate makes F1 *not applicable* (None); ``f1_gate_zeroed`` is 0
  there, so the aggregate mean of ``f1`` is the conditional mean and that of ``f1_gate_zeroed`` the
  gate-zeroed mean (O-B4); ``gate`` averages to the pass rate.
* ``scene_f1``: the gate counts only with ``require_gate`` (off by default) and then zeroes F1.

``official_parity=True`` switches to the released code's behaviour: its mixed precision and ICP
procedure, the official gate without worldrecall's absolute floor (errata 6), and "not applicable" where
the release cannot read the sidecar (intrinsics other than ``[N,3,3]``, native ViPE layout). Statuses
follow ``memory_loop.py``: a failed gate and any failure while building the clouds are "not applicable" (value
None); a missing sidecar or action program (the release's not applicable too) leaves nothing measured, so the row
is skipped with one line naming the file and how to produce it; fewer than 2 poses or a non-finite pose fail the
case. docs/scene_memory.md
lists every remaining difference.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import ConfigTypeError, MeasureContext, Metric, MissingInput, Value
from worldrecall.core.data import Alignment, Case, CaseFailure
from worldrecall.formats.arrays import load_npz, npz_names
from worldrecall.formats.vipe import Sidecar, read_points_file, read_sidecar
from worldrecall.plugins.scene_memory.aligners import (
    case_sidecar,
    has_precomputed,
    missing_intrinsics,
    missing_vipe,
    skip_if_missing,
)
from worldrecall.plugins.scene_memory.clouds import stack_cloud
from worldrecall.plugins.scene_memory.exports import (
    MissingExport,
    is_native_layout,
    read_depth_exports,
    read_release_intrinsics,
)
from worldrecall.plugins.scene_memory.f1 import ALIGNMENTS, KernelResult, NotApplicable, score_point_clouds

KERNEL_THRESHOLDS: dict[str, Any] = {
    "voxel_size": 0.0,                 # 0 = no voxel down-sampling
    "alignment": "trimmed_icp",        # trimmed_icp | anything else: centroid (centroid_align) or none
    "centroid_align": False,           # used only when alignment ≠ trimmed_icp (code default true; config false)
    "distance_threshold": None,        # absolute τ; null = ratio × scene diagonal
    "distance_threshold_ratio": 0.02,
    "strict": True,                    # retention d < τ, hallucination d ≥ τ (false: ≤ / >)
    "float32": False,                  # compute the kernel in float32 like the released code
    "icp_max_iterations": 20,
    "icp_trim": 0.8,
    "icp_tolerance": 1e-5,
    "icp_max_translation_ratio": 0.10,
    "icp_max_rotation_deg": 10.0,
    "official_parity": False,          # float32 kernel + official gate (no absolute floor)
}

_BUNDLE_KEYS = (("pobs", "prev"), ("observation", "revisit"))


def _load_precomputed(case: Case) -> tuple[np.ndarray, np.ndarray, str]:
    s = case.sidecars
    if "scene_memory_npz" in s:
        path = Path(s["scene_memory_npz"])
        for ko, kr in _BUNDLE_KEYS:  # member headers checked before inflating (formats.arrays)
            z = load_npz(path, (ko, kr))
            if ko in z and kr in z:
                o, r = z[ko], z[kr]
                break
        else:
            raise CaseFailure(f"{path}: needs keys pobs/prev or observation/revisit "
                              f"(found: {', '.join(npz_names(path)) or 'none'})")
        for arr, k in ((o, "observation"), (r, "revisit")):
            if arr.ndim != 2 or arr.shape[1] < 3 or not np.issubdtype(arr.dtype, np.number):
                raise CaseFailure(f"{path}: {k} cloud of shape {list(arr.shape)}; expected [N,>=3]")
        return o[:, :3].astype(np.float32), r[:, :3].astype(np.float32), path.name
    o = read_points_file(Path(s["observation_cloud"]), ("points", "point_cloud", "pobs", "observation"))
    r = read_points_file(Path(s["revisit_cloud"]), ("points", "point_cloud", "prev", "revisit"))
    return o.astype(np.float32), r.astype(np.float32), Path(s["observation_cloud"]).name


class _SceneF1Base(Metric):
    """Shared measure stage and kernel scoring of both variants."""

    benchmark = "scene_memory"
    version = "1"
    primary = "f1"
    values: ClassVar[dict[str, Value]] = {
        "f1": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                    description="harmonic mean of retention and precision under this variant's gate"),
        "f1_gate_zeroed": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                                description="F1 with a failed gate counted as 0"),
        "f1_ungated": Value(higher_is_better=True, range=(0.0, 1.0), unit="", description="kernel F1, gate ignored"),
        "retention": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                           description="observation points the revisit reproduces within tau"),
        "precision": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                           description="revisit points within tau of the observation"),
        "hallucination": Value(higher_is_better=False, range=(0.0, 1.0), unit="",
                               description="revisit points with no observation point within tau"),
        "gate": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                      description="the camera left and returned (1) or not (0)"),
        "gate_official": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                               description="the published protocol's return gate"),
        "leg_f1_min": Value(higher_is_better=True, range=(0.0, 1.0), unit="", description="lowest per-leg F1"),
        "leg_f1_mean": Value(higher_is_better=True, range=(0.0, 1.0), unit="", description="mean per-leg F1"),
        "applicable": Value(higher_is_better=None, range=(0.0, 1.0), unit="",
                            description="F1 is defined for this case (1) or not (0)"),
        "n_obs": Value(higher_is_better=None, range=None, unit="points", description="observation cloud size"),
        "n_rev": Value(higher_is_better=None, range=None, unit="points", description="revisit cloud size"),
        "tau": Value(higher_is_better=None, range=None, unit="scene units", description="distance threshold"),
        "diagonal": Value(higher_is_better=None, range=None, unit="scene units",
                          description="scene bounding-box diagonal (tau's reference)"),
        "icp_accepted": Value(higher_is_better=None, range=(0.0, 1.0), unit="",
                              description="the ICP alignment was accepted (1) or rejected (0)"),
        "icp_iterations": Value(higher_is_better=None, range=None, unit="", description="ICP iterations run"),
        "icp_translation": Value(higher_is_better=None, range=None, unit="scene units",
                                 description="translation of the ICP alignment"),
        "icp_rotation_deg": Value(higher_is_better=None, range=(0.0, 180.0), unit="deg",
                                  description="rotation of the ICP alignment"),
        "split_row": Value(higher_is_better=None, range=None, unit="rows",
                           description="first row of the revisit leg"),
        "n_pairs": Value(higher_is_better=None, range=None, unit="", description="revisit pose pairs"),
        "departure": Value(higher_is_better=None, range=None, unit="scene units",
                           description="distance of the turnaround pose from the start"),
        "n_legs": Value(higher_is_better=None, range=None, unit="legs", description="per-leg clouds scored"),
    }
    LEG_F1: ClassVar[Value] = Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                                    description="F1 of one leg of a multi-loop program (leg<j>_f1)")
    models = ()
    params: ClassVar[dict[str, Any]] = {
        "frames_per_segment": 8,       # B.6: evenly spaced rows per leg
        "points_per_frame": 4096,      # B.6: evenly spaced valid pixels per row
        "use_precomputed": True,       # prefer the case's own clouds (scene_memory NPZ / explicit files)
        "per_leg": True,               # O-B3: per-leg clouds for multi-loop programs
    }

    def missing_inputs(self, case: Case) -> list[MissingInput]:
        """The rollout's ViPE sidecar (or precomputed clouds): every value here is computed from it."""
        return missing_vipe(case)

    def __init__(self, params: Mapping[str, Any] | None = None, thresholds: Mapping[str, Any] | None = None):
        super().__init__(params, thresholds)
        # refuse a bad choice at config time, not once per case
        al = self.thresholds["alignment"]
        if al is not None and not isinstance(al, str):
            # any other string is the release's fallback (centroid when centroid_align, else none)
            raise ConfigTypeError(f"{self.name}.thresholds.alignment: expected null or a string such as "
                                  f"{' or '.join(ALIGNMENTS)}, got {al!r}")
        tau = self.thresholds["distance_threshold"]
        if tau is not None and (isinstance(tau, bool) or not isinstance(tau, (int, float))):
            raise ConfigTypeError(f"{self.name}.thresholds.distance_threshold: expected null or a number, got {tau!r}")
        for key in ("frames_per_segment", "points_per_frame"):
            if self.params[key] < 1:
                raise ConfigTypeError(f"{self.name}.params.{key}: must be ≥ 1, got {self.params[key]}")

    @classmethod
    def value_meta(cls, value: str) -> Value:
        """Declared values as above, plus the per-leg family ``leg<j>_f1`` (one per leg the program has)."""
        if re.fullmatch(r"leg[1-9][0-9]*_f1", value):
            return cls.LEG_F1
        return super().value_meta(value)

    # -- measure ---------------------------------------------------------------------------------
    # how this variant reads its sidecar (the two released paths differ): the poses' dtype in the
    # back-projection, and whether an unreadable depth export is "not applicable" (official: any failure
    # while building the clouds is) or an error (experimental: every failure but a missing file is)
    pose_dtype: ClassVar[type] = np.float64
    unreadable_is_na: ClassVar[bool] = True
    kernel_failure_is_error: ClassVar[bool] = False  # empty cloud / ICP on < 3 points: official "not applicable"

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Build the observation/revisit clouds (float32) and copy the split and gate facts."""
        info = alignment.info
        facts = {k: info.get(k) for k in ("method", "split_row", "n_rows", "gate", "gate_official",
                                          "departed", "returned", "n_pairs", "departure", "extent",
                                          "max_translation", "max_rotation_deg", "floor_passed", "gate_error")}
        out: dict[str, Any] = {"facts": facts, "split_ok": bool(info.get("split_ok", False)),
                               "reason": str(info.get("reason", "")), "legs": [], "release_readable": True}
        if self.params["use_precomputed"] and has_precomputed(case):
            o, r, src = _load_precomputed(case)
            out.update(source=f"precomputed:{src}", observation=o, revisit=r, split_ok=True, reason="")
            return out
        skip_if_missing(info)  # a skip naming the file and how to produce it, never an ok row without values
        if not out["split_ok"]:
            out["source"] = "sidecar"
            return out
        sc = case_sidecar(case, need_depth=False)
        n = int(info.get("n_rows") or len(sc))
        if n > len(sc) or (info.get("n_pose_rows") is not None and int(info["n_pose_rows"]) != len(sc)) \
                or (info.get("n_pose_rows") is None and n != len(sc)):
            raise CaseFailure(f"{sc.source}: {len(sc)} rows but the alignment was made on {info.get('n_rows')}")
        try:
            depth, valid, K, why = self._depth_inputs(sc)
        except MissingExport as e:
            out.update(source="sidecar", split_ok=False, reason=str(e))
            return out
        except CaseFailure as e:
            if not self.unreadable_is_na:
                raise
            out.update(source="sidecar", split_ok=False, reason=str(e))
            return out
        if missing_intrinsics(sc):  # as released: checked after the depth exports' presence; not applicable
            out.update(source="sidecar", split_ok=False, reason=missing_intrinsics(sc))
            return out
        out["release_readable"], out["release_reason"] = not why, why
        poses = sc.poses_c2w.astype(self.pose_dtype)
        k = int(info["split_row"])
        kw = {"frames_per_segment": self.params["frames_per_segment"],
              "points_per_frame": self.params["points_per_frame"]}
        o, o_rows, o_counts = stack_cloud(depth, valid, K, poses, 0, k, **kw)
        r, r_rows, r_counts = stack_cloud(depth, valid, K, poses, k, n, **kw)
        out.update(source="sidecar", observation=o, revisit=r, observation_rows=o_rows, revisit_rows=r_rows,
                   observation_counts=o_counts, revisit_counts=r_counts,
                   frames_observation=[int(sc.frame_indices[i]) for i in o_rows],
                   frames_revisit=[int(sc.frame_indices[i]) for i in r_rows])
        if self.params["per_leg"]:
            for j, (t, e) in enumerate(info.get("legs") or [], start=1):
                out[f"leg{j}_observation"] = stack_cloud(depth, valid, K, poses, 0, int(t), **kw)[0]
                out[f"leg{j}_revisit"] = stack_cloud(depth, valid, K, poses, int(t), int(e), **kw)[0]
                out["legs"].append([int(t), int(e)])
        out["notes"] = list(sc.notes)  # e.g. corrupt EXR frames read as NaN, after every row was read
        # and on the case, where the engine copies them onto this metric's rows (kept with the measurement)
        case.warnings.extend(n for n in sc.notes if n not in case.warnings)
        return out

    def _depth_inputs(self, sc: Sidecar) -> tuple[Any, Any, np.ndarray, str]:
        """(depth, valid, intrinsics [N,3,3], why the release could not read this sidecar or "")."""
        if is_native_layout(sc.source):  # [ours] native vipe output, read through the sidecar reader
            full = read_sidecar(sc.source, need_depth=True, need_instances=False)
            return full.depth, full.valid, full.intrinsics, ("native ViPE layout (the release reads the converted "
                                                             "layout only)")
        depth, valid = read_depth_exports(sc.source)
        return depth, valid, sc.intrinsics, self._intrinsics_note(sc)

    def _intrinsics_note(self, sc: Sidecar) -> str:
        """Why the release would not take this sidecar's intrinsics ("" when it would)."""
        return ""

    # -- score -----------------------------------------------------------------------------------
    def kernel(self, observation: np.ndarray, revisit: np.ndarray, th: Mapping[str, Any]) -> KernelResult:
        """The B.7 kernel under the thresholds ``th``, with per-point outcomes for the artifacts.

        Memoised on this metric instance by content (the engine scores, then writes the artifacts of the same
        case with the same instance, so the artifacts reuse the score's run). A worker scores a clip's cases
        together, and models that change only appearance share the clip's geometry, hence its clouds: the
        memo holds the last ``KERNEL_MEMO_ENTRIES`` results (a clip's models with their legs) within
        ``KERNEL_MEMO_BYTES`` of per-point arrays, so those cases reuse one run. Pure: the same clouds and
        thresholds give the same result.
        """
        key = (_digest(observation), _digest(revisit), tuple(sorted((k, str(v)) for k, v in th.items())))
        memo: dict[tuple, KernelResult] = self.__dict__.setdefault("_kernels", {})
        if key not in memo:
            res = self._kernel(observation, revisit, th)
            held = sum(_points_bytes(r) for r in memo.values()) + _points_bytes(res)
            while memo and (len(memo) >= KERNEL_MEMO_ENTRIES or held > KERNEL_MEMO_BYTES):
                held -= _points_bytes(memo.pop(next(iter(memo))))
            memo[key] = res
        return memo[key]

    @staticmethod
    def _kernel(observation: np.ndarray, revisit: np.ndarray, th: Mapping[str, Any]) -> KernelResult:
        return score_point_clouds(
            observation, revisit, voxel_size=float(th["voxel_size"]), alignment=str(th["alignment"] or "none"),
            centroid_align=bool(th["centroid_align"]),
            distance_threshold=None if th["distance_threshold"] is None else float(th["distance_threshold"]),
            distance_threshold_ratio=float(th["distance_threshold_ratio"]), strict=bool(th["strict"]),
            float32=bool(th["float32"] or th["official_parity"]), icp_max_iterations=int(th["icp_max_iterations"]),
            icp_trim=float(th["icp_trim"]), icp_tolerance=float(th["icp_tolerance"]),
            icp_max_translation_ratio=float(th["icp_max_translation_ratio"]),
            icp_max_rotation_deg=float(th["icp_max_rotation_deg"]), keep_points=True)

    def _gate(self, m: Mapping[str, Any], th: Mapping[str, Any]) -> bool | None:
        facts = m.get("facts") or {}
        g = facts.get("gate_official") if th["official_parity"] else facts.get("gate")
        return None if g is None else bool(g)

    def _apply_gate(self, f1: float, gate: bool | None, th: Mapping[str, Any]) -> tuple[float | None, float]:
        """(f1, f1_gate_zeroed) for a kernel F1 under this variant's gate semantics."""
        raise NotImplementedError

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """Kernel values + gate semantics; None marks "not applicable" (skipped, not zero)."""
        th = {**type(self).thresholds, **dict(thresholds)}
        m = measurement
        facts = m.get("facts") or {}
        gate = self._gate(m, th)
        vals: dict[str, float | None] = {
            "f1": None, "f1_gate_zeroed": None, "f1_ungated": None, "retention": None, "precision": None,
            "hallucination": None, "gate": None if gate is None else float(gate),
            "gate_official": None if facts.get("gate_official") is None else float(bool(facts["gate_official"])),
            "applicable": 0.0, "n_obs": None, "n_rev": None, "tau": None, "diagonal": None,
            "icp_accepted": None, "icp_iterations": None, "icp_translation": None, "icp_rotation_deg": None,
            "split_row": None if facts.get("split_row") is None else float(facts["split_row"]),
            "n_pairs": None if facts.get("n_pairs") is None else float(facts["n_pairs"]),
            "departure": facts.get("departure"),
        }
        self._check_gate_inputs(facts, th)
        readable = bool(m.get("release_readable", True)) or not th["official_parity"]
        if m.get("split_ok") and readable and "observation" in m and "revisit" in m:
            try:
                res = self.kernel(np.asarray(m["observation"]), np.asarray(m["revisit"]), th)
            except NotApplicable as e:
                if self.kernel_failure_is_error:  # the experimental path reports these as errors
                    raise CaseFailure(f"{self.name}: {e}") from None
                res = None
            if res is not None:
                kv = res.values()
                vals.update({k: kv[k] for k in ("n_obs", "n_rev", "tau", "diagonal", "icp_accepted",
                                                "icp_iterations", "icp_translation", "icp_rotation_deg")})
                vals["f1_ungated"] = res.f1
                f1, zeroed = self._apply_gate(res.f1, gate, th)
                vals["f1"], vals["f1_gate_zeroed"] = f1, zeroed
                if f1 is not None:
                    vals.update(retention=res.retention, precision=res.precision,
                                hallucination=res.hallucination, applicable=1.0)
        if gate is False:  # O-B4: a failed gate counts as 0 in the gate-zeroed mean, whatever else failed
            vals["f1_gate_zeroed"] = 0.0
        vals.update(self._legs(m, th))
        return vals

    def _check_gate_inputs(self, facts: Mapping[str, Any], th: Mapping[str, Any]) -> None:
        """Raise when the gate this variant counts could not be computed (an error, as released)."""

    def _legs(self, m: Mapping[str, Any], th: Mapping[str, Any]) -> dict[str, float | None]:
        legs = list(m.get("legs") or [])
        out: dict[str, float | None] = {"n_legs": float(len(legs)), "leg_f1_min": None, "leg_f1_mean": None}
        f1s = []
        for j in range(1, len(legs) + 1):
            try:
                f = self.kernel(np.asarray(m[f"leg{j}_observation"]), np.asarray(m[f"leg{j}_revisit"]), th).f1
            except (NotApplicable, KeyError):
                f = None
            out[f"leg{j}_f1"] = f
            if f is not None:
                f1s.append(f)
        if f1s:
            out["leg_f1_min"], out["leg_f1_mean"] = float(min(f1s)), float(np.mean(f1s))
        return out

    # -- artifacts -------------------------------------------------------------------------------
    def artifacts(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any], out_dir: Path) -> list[Path]:
        """PLY of both clouds (revisit after alignment) coloured by outcome, and a PNG rendering."""
        from worldrecall.plugins.scene_memory.render import write_artifacts

        m = measurement
        if not (m.get("split_ok") and "observation" in m and "revisit" in m):
            return []
        th = {**type(self).thresholds, **dict(thresholds)}
        try:
            res = self.kernel(np.asarray(m["observation"]), np.asarray(m["revisit"]), th)
        except NotApplicable:
            return []
        return write_artifacts(res, Path(out_dir), title=f"{self.name}  F1={res.f1:.3f}")


KERNEL_MEMO_ENTRIES = 24        # a clip's 8 synthetic models, each with its clouds and up to 2 legs
KERNEL_MEMO_BYTES = 128 << 20   # per-point arrays a worker may hold (a clip's cases sharing geometry are adjacent)


def _points_bytes(res: KernelResult) -> int:
    return sum(a.nbytes for a in (res.obs, res.rev, res.retained, res.hallucinated))


def _digest(a: np.ndarray) -> str:
    import hashlib

    a = np.ascontiguousarray(a)
    return hashlib.sha1(a.tobytes() + str((a.dtype, a.shape)).encode()).hexdigest()


class MemorySceneF1(_SceneF1Base):
    """Official Scene Memory F1: turnaround split, trimmed ICP, τ = 2 % of the scene diagonal; gate skips."""

    name = "scene_memory.memory_scene_f1"
    description = ("point-cloud retention vs hallucination between the observation and revisit legs split "
                   "at the pose turnaround; not applicable when the camera did not leave and return")
    thresholds: ClassVar[dict[str, Any]] = {**KERNEL_THRESHOLDS, "require_gate": True}

    def _intrinsics_note(self, sc: Sidecar) -> str:
        # the official metric takes intrinsics.npy only as [N,3,3] (other forms are the experimental path's)
        if read_release_intrinsics(sc.source) is None:
            return f"{sc.source / 'intrinsics.npy'}: missing or not [N,3,3] (the release needs it so)"
        return ""

    def _apply_gate(self, f1: float, gate: bool | None, th: Mapping[str, Any]) -> tuple[float | None, float]:
        if gate is False and th["require_gate"]:
            return None, 0.0
        return f1, f1 if gate is not False else 0.0


class SceneF1(_SceneF1Base):
    """Experimental Scene Memory F1: split at the first ground-truth action boundary; gate optional (zeroes)."""

    name = "scene_memory.scene_f1"
    description = ("point-cloud retention vs hallucination split at the first action-segment boundary "
                   "(experimental long-horizon diagnostic)")
    aligner = "scene_memory.actions"  # the runner uses this instead of the benchmark's default aligner
    # the released config turns the return gate on for this metric (require_return_gate: true)
    thresholds: ClassVar[dict[str, Any]] = {**KERNEL_THRESHOLDS, "require_gate": True}
    pose_dtype: ClassVar[type] = np.float32   # the release loads this path's poses as float32
    unreadable_is_na: ClassVar[bool] = False  # every failure but a missing file is an error
    kernel_failure_is_error: ClassVar[bool] = True

    def _check_gate_inputs(self, facts: Mapping[str, Any], th: Mapping[str, Any]) -> None:
        if th["require_gate"] and facts.get("gate_error"):
            raise CaseFailure(str(facts["gate_error"]))

    def _apply_gate(self, f1: float, gate: bool | None, th: Mapping[str, Any]) -> tuple[float | None, float]:
        if gate is False and th["require_gate"]:
            return 0.0, 0.0
        return f1, f1 if gate is not False else 0.0
