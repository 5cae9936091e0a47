"""Speed of the Scene-Memory-F1 score stage: two 32,768-point clouds including trimmed ICP, on one core.

Builds the observation/revisit clouds of an analytic box-room loop exactly as the measure stage does
(8 rows per leg × 4,096 points per row), perturbs the revisit leg by a small rigid motion plus noise so ICP
has real work to do, then times

* ``score_point_clouds`` (scipy cKDTree, own Kabsch) — what ``memory_scene_f1.score`` runs, and
* a brute-force numpy reference of the same kernel (chunked all-pairs nearest neighbours),

on the same input in the same run, and prints both times, their ratio and whether the scores agree.

    python benchmarks/scene_memory.py            # 32,768 points per cloud
    python benchmarks/scene_memory.py --points 8192 --repeats 5
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"  # one core, set before numpy loads its BLAS

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np
from helpers.scene_memory_fixtures import room_rollout

from worldrecall.formats.vipe import read_sidecar
from worldrecall.plugins.scene_memory.clouds import segment_cloud
from worldrecall.plugins.scene_memory.f1 import score_point_clouds
from worldrecall.plugins.scene_memory.icp import kabsch
from worldrecall.plugins.scene_memory.trajectory import turnaround_gate


def build_clouds(points: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Observation and (perturbed) revisit clouds of a yaw loop through the box room."""
    per_frame = points // 8
    # depth maps with a bit more than ``per_frame`` pixels, so the measure stage subsamples like on real data
    w = math.ceil(math.sqrt(per_frame * 4 / 3) * 1.15)
    h = math.ceil(w * 3 / 4)
    with tempfile.TemporaryDirectory() as tmp:
        d, _ = room_rollout(Path(tmp) / "sc", "yaw180", w=w, h=h, frames_per_action=2)
        sc = read_sidecar(d)
        k = turnaround_gate(sc.poses_c2w, 16.0).k_star
        obs = segment_cloud(sc, 0, k, points_per_frame=per_frame)[0]
        rev = segment_cloud(sc, k, len(sc), points_per_frame=per_frame)[0]
    rng = np.random.default_rng(seed)
    diag = float(np.linalg.norm(obs.max(0) - obs.min(0)))
    a = math.radians(2.0)
    R = np.array([[math.cos(a), 0, math.sin(a)], [0, 1, 0], [-math.sin(a), 0, math.cos(a)]])
    rev = rev.astype(np.float64) @ R.T + 0.03 * diag * np.array([0.8, 0.1, 0.6])
    rev += rng.normal(scale=0.002 * diag, size=rev.shape)
    return obs.astype(np.float32), rev.astype(np.float32)


# -- brute-force reference ------------------------------------------------------------------------------
def brute_nn(query: np.ndarray, target: np.ndarray, chunk: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Exact nearest neighbour by chunked all-pairs squared distances (float64).

    argmin_j ‖q − t_j‖² = argmin_j (‖t_j‖² − 2 q·t_j); the distance is then recomputed directly.
    """
    tn = np.einsum("ij,ij->i", target, target)
    idx = np.empty(len(query), dtype=np.int64)
    for a in range(0, len(query), chunk):
        m = query[a:a + chunk] @ target.T
        m *= -2.0
        m += tn
        idx[a:a + chunk] = np.argmin(m, axis=1)
    return np.linalg.norm(query - target[idx], axis=1), idx


def reference_kernel(O: np.ndarray, V: np.ndarray, *, ratio: float = 0.02, iters: int = 20, trim: float = 0.8,
                     tol: float = 1e-5, max_t: float = 0.10, max_r: float = 10.0) -> dict[str, float]:
    """The B.7 kernel with brute-force nearest neighbours (float64, no voxel, trimmed ICP, strict τ)."""
    O = O.astype(np.float64)
    cur = V.astype(np.float64)
    keep_n = max(3, math.ceil(trim * len(cur)))
    R_tot, t_tot, prev = np.eye(3), np.zeros(3), math.inf
    for _ in range(iters):
        d, idx = brute_nn(cur, O)
        keep = np.argsort(d, kind="stable")[:keep_n]
        err = float(d[keep].mean())
        R, t = kabsch(cur[keep], O[idx[keep]])
        cur = cur @ R.T + t
        R_tot, t_tot = R @ R_tot, R @ t_tot + t
        if abs(prev - err) <= tol:
            break
        prev = err
    bound = max(max_t * float(np.linalg.norm(O.max(0) - O.min(0))), 1e-8)
    ang = math.degrees(math.acos(min(1.0, max(-1.0, (np.trace(R_tot) - 1) / 2))))
    Va = V.astype(np.float64) @ R_tot.T + t_tot if (np.linalg.norm(t_tot) <= bound and ang <= max_r) \
        else V.astype(np.float64)
    both = np.concatenate([O, Va])
    tau = max(max(ratio * float(np.linalg.norm(both.max(0) - both.min(0))), 1e-6), 1e-8)
    d_o = brute_nn(O, Va)[0]
    d_v = brute_nn(Va, O)[0]
    R_, P_ = float(np.mean(d_o < tau)), 1.0 - float(np.mean(d_v >= tau))
    return {"retention": R_, "precision": P_, "f1": 2 * P_ * R_ / (P_ + R_) if P_ + R_ > 1e-8 else 0.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=32768, help="points per cloud (8 frames per leg)")
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats of the fast kernel (best is shown)")
    args = ap.parse_args()

    O, V = build_clouds(args.points)
    print(f"clouds: observation {len(O):,} points, revisit {len(V):,} points (float32), one core")

    times, res = [], None
    for _ in range(max(1, args.repeats)):
        t0 = time.perf_counter()
        res = score_point_clouds(O, V)
        times.append(time.perf_counter() - t0)
    fast = min(times)
    print(f"score_point_clouds (cKDTree + trimmed ICP): best {fast:.3f} s of {len(times)} "
          f"(median {float(np.median(times)):.3f} s); ICP {res.icp.iterations} iterations, "
          f"accepted={res.icp_accepted}; F1={res.f1:.6f} R={res.retention:.6f} P={res.precision:.6f}")

    t0 = time.perf_counter()
    ref = reference_kernel(O, V)
    slow = time.perf_counter() - t0
    print(f"brute-force numpy reference:                 {slow:.3f} s; "
          f"F1={ref['f1']:.6f} R={ref['retention']:.6f} P={ref['precision']:.6f}")
    agree = abs(ref["f1"] - res.f1) <= 1e-6
    print(f"speed-up over the reference: {slow / fast:.1f}x; scores agree (|ΔF1| ≤ 1e-6): {agree}")


if __name__ == "__main__":
    main()
