"""Benchmark: records anywhere in a box (the certified sup and the continuous design).

Two tables, CPU time (``time.process_time``) throughout, peers run side by side in this process:

1. The certified sup of t_g(x, y)^T A t_g(x, y) over a box [0, 1]^d (query at the centre, A a
   random positive definite matrix): relative gap upper/lower - 1 and CPU time of
   ``certificates.box_sup.certified_box_sup`` against the targets (d <= 2: 1e-6 in < 1 s; d = 3:
   1e-4 in < 2 s; d = 5: 1e-2 in < 10 s; d = 10: a valid bound with its gap), next to a plain
   best-first branch-and-bound over pairs of sub-boxes with the decoupled bound
   expit(z_max)^2 * (max over the difference box's vertices), given the same CPU time (capped).
2. The continuous design (every record in the box) against the uniform-query design of the box
   (which it must never exceed) and the grid designs of 2, 5, 11 points per axis (which
   under-noise records off the grid: their certified sup over the box / q is shown), with CPU
   times and the ratio to the grid design's time.

Usage: ``python scripts/bench_box.py [--quick] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import math
import time
import warnings
from typing import Any

import numpy as np
from scipy.special import expit

import dpopt
from certificates.box_sup import certified_box_sup
from dpopt.covariance.sensitivity import uniform_query_set

#: d -> (target gap, target CPU seconds); d = 10 has no target, only a valid bound.
TARGETS: dict[int, tuple[float | None, float | None]] = {
    1: (1e-6, 1.0), 2: (1e-6, 1.0), 3: (1e-4, 2.0), 5: (1e-2, 10.0), 10: (None, None),
}


def _spd(d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(d, d))
    return m @ m.T + 0.5 * np.eye(d)


def _peer_decoupled(lo: np.ndarray, hi: np.ndarray, g: np.ndarray, sigma: float, a: np.ndarray,
                    seconds: float) -> tuple[float, float]:
    """Plain best-first B&B over pairs (X, Y) of sub-boxes with the decoupled bound; returns
    (upper, lower) after ``seconds`` of CPU time (no outward rounding: a reference only)."""
    d = lo.size
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=d)))

    def value(x: np.ndarray, y: np.ndarray) -> float:
        z = (np.sum((g - y) ** 2) - np.sum((g - x) ** 2)) / (2 * sigma**2)
        t = expit(z) * (x - y)
        return float(t @ a @ t)

    def bound(xl, xu, yl, yu) -> float:
        far = np.maximum((g - yl) ** 2, (g - yu) ** 2)
        near = np.where((g >= xl) & (g <= xu), 0.0, np.minimum((g - xl) ** 2, (g - xu) ** 2))
        zmax = float(np.sum(far - near)) / (2 * sigma**2)
        dl, du = xl - yu, xu - yl
        c, w = (dl + du) / 2, (du - dl) / 2
        verts = c + signs * w
        return expit(zmax) ** 2 * float(np.max(np.einsum("ij,jk,ik->i", verts, a, verts)))

    best = max(value(lo, hi), value(hi, lo))
    heap = [(-bound(lo, hi, lo, hi), 0, lo, hi, lo, hi)]
    counter = 1
    start = time.process_time()
    while heap and time.process_time() - start < seconds:
        nb, _, xl, xu, yl, yu = heapq.heappop(heap)
        if -nb <= best * (1 + 1e-12):
            heap = []
            best_upper = best
            return best_upper, best
        widths = np.concatenate([xu - xl, yu - yl])
        j = int(np.argmax(widths))
        for half in (0, 1):
            cxl, cxu, cyl, cyu = xl.copy(), xu.copy(), yl.copy(), yu.copy()
            if j < d:
                mid = (xl[j] + xu[j]) / 2
                (cxu if half == 0 else cxl)[j] = mid
            else:
                mid = (yl[j - d] + yu[j - d]) / 2
                (cyu if half == 0 else cyl)[j - d] = mid
            best = max(best, value((cxl + cxu) / 2, (cyl + cyu) / 2))
            b = bound(cxl, cxu, cyl, cyu)
            if b > best:
                heapq.heappush(heap, (-b, counter, cxl, cxu, cyl, cyu))
                counter += 1
    upper = -heap[0][0] if heap else best
    return max(upper, best), best


def sup_table(quick: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    cases = [(1, 0.05), (2, 0.3), (2, 0.05), (3, 0.1), (3, 0.3), (5, 0.2), (10, 0.3)]
    if quick:
        cases = [(1, 0.05), (2, 0.3), (3, 0.1), (5, 0.2)]
    for d, sigma in cases:
        tol, limit = TARGETS[d]
        lo, hi, g = np.zeros(d), np.ones(d), np.full(d, 0.5)
        a = _spd(d, d)
        t0 = time.process_time()
        res = certified_box_sup(lo, hi, g, sigma, precision=a, tol=tol or 1e-6,
                                max_nodes=2_000_000 if d < 10 else 1_000_000)
        cpu = time.process_time() - t0
        peer_cpu = min(max(cpu, 0.5), 5.0 if quick else 20.0)
        t1 = time.process_time()
        p_up, p_low = _peer_decoupled(lo, hi, g, sigma, a, peer_cpu)
        peer_cpu = time.process_time() - t1
        rows.append({
            "d": d, "sigma": sigma, "target_gap": tol, "target_seconds": limit,
            "gap": res.gap, "cpu": cpu, "nodes": res.nodes, "upper": res.upper,
            "lower": res.lower,
            "met": (None if tol is None or limit is None
                    else bool(res.gap <= tol and cpu < limit)),
            "peer_gap": p_up / p_low - 1 if p_low > 0 else math.inf, "peer_cpu": peer_cpu,
        })
    return rows


def design_table(quick: bool) -> list[dict[str, Any]]:
    budget = dpopt.ApproxDP(epsilon=1.0, delta=1e-6)
    rows: list[dict[str, Any]] = []
    cases = [(1, 0.05), (2, 0.1), (3, 0.1)] if not quick else [(1, 0.05), (2, 0.1)]
    for d, sigma in cases:
        lo, hi, g = np.zeros(d), np.ones(d), np.full(d, 0.5)
        box = dpopt.Box(lo, hi)
        sset = dpopt.add_remove_set(box, g, sigma)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.process_time()
            cont = dpopt.design_covariance(sset, budget, tol=1e-3)
            t_cont = time.process_time() - t0
            t0 = time.process_time()
            uq = dpopt.design_covariance(uniform_query_set(box), budget)
            t_uq = time.process_time() - t0
            grids = {}
            for n in (2, 5, 11):
                if n**d > 2000:
                    continue
                t0 = time.process_time()
                gd = dpopt.design_covariance(
                    dpopt.add_remove_set(dpopt.Grid(lo, hi, (n,) * d), g, sigma), budget)
                t_g = time.process_time() - t0
                true = sset.sup(gd.covariance, tol=1e-4).upper / gd.bound
                grids[n] = {"value": gd.value, "cpu": t_g, "sup_over_q": true,
                            "epsilon": dpopt.privacy_of(gd.covariance, sset).epsilon(1e-6)}
        rows.append({
            "d": d, "sigma": sigma, "value": cont.value, "lower": cont.certificate.lower,
            "gap": cont.certificate.gap, "cpu": t_cont, "method": cont.coverage.method,
            "iterations": cont.coverage.iterations, "uniform_query": uq.value, "uq_cpu": t_uq,
            "grids": grids,
        })
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer, smaller cases")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    args = ap.parse_args()
    sups = sup_table(args.quick)
    print("certified sup over [0,1]^d, query at the centre, random A > 0 (CPU seconds)")
    print(" d  sigma  target          gap        cpu     nodes    met  | decoupled B&B peer: "
          "gap at cpu")
    for r in sups:
        tgt = ("valid bound" if r["target_gap"] is None
               else f"{r['target_gap']:.0e} <{r['target_seconds']:.0f}s")
        met = "-" if r["met"] is None else ("yes" if r["met"] else "NO")
        print(f"{r['d']:2d}  {r['sigma']:<5g}  {tgt:<14s}  {r['gap']:<9.2e}  {r['cpu']:<6.2f}  "
              f"{r['nodes']:<8d} {met:<4s} | {r['peer_gap']:.2e} at {r['peer_cpu']:.1f}s")
    des = design_table(args.quick)
    print("\ncontinuous design vs uniform-query vs grids, [0,1]^d, query at the centre, "
          "(1, 1e-6)-DP (tr Sigma; CPU seconds)")
    for r in des:
        print(f"d = {r['d']}, sigma = {r['sigma']}: box design {r['value']:.6g} "
              f"(certified gap {r['gap']:.1e}, {r['method']}, {r['iterations']} rounds, "
              f"{r['cpu']:.2f}s); uniform query {r['uniform_query']:.6g} "
              f"(x{r['uniform_query'] / r['value']:.3f} the error, {r['uq_cpu']:.2f}s)")
        for n, gr in r["grids"].items():
            print(f"    grid {n} per axis: {gr['value']:.6g} (x{gr['value'] / r['value']:.3f}), "
                  f"true sup over the box {gr['sup_over_q']:.3f} q (epsilon {gr['epsilon']:.3f} "
                  f"claimed 1), {gr['cpu']:.2f}s; box design time x{r['cpu'] / gr['cpu']:.1f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"sup": sups, "design": des}, fh, indent=2, default=float)


if __name__ == "__main__":
    main()
