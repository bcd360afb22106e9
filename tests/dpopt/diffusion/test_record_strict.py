"""Run records read strictly: malformed fields are refused naming the field (never a Python
exception, never a string taken as a number), and the stated totals may claim less privacy than
the releases prove, never more (checked here against mu-GDP's delta(eps) written out)."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import norm

from certificates.errors import CertificateError
from dpopt.accounting.budgets import ApproxDP
from dpopt.cli.main import main
from dpopt.covariance.domains import Grid
from dpopt.diffusion.sampler import sample_private
from dpopt.verification import verify


@pytest.fixture(scope="module")
def record() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    data = np.clip(rng.normal([0.3, 0.6], 0.15, (20, 2)), 0.0, 1.0)
    run = sample_private(data, Grid([0.0, 0.0], [1.0, 1.0], (3, 3)), ApproxDP(3.0, 1e-5),
                         samples=1, steps=2, rng=3)
    return run.record  # type: ignore[no-any-return]


def _write(tmp: Path, rec: dict[str, Any]) -> Path:
    path = tmp / "run.json"
    path.write_text(json.dumps(rec))
    return path


def _edit(rec: dict[str, Any], fn: Any) -> dict[str, Any]:
    out = copy.deepcopy(rec)
    fn(out)
    return out


@pytest.mark.parametrize(("name", "edit", "field"), [
    ("noise deleted", lambda r: r.pop("noise"), "noise"),
    ("noise a boolean", lambda r: r.__setitem__("noise", True), "noise"),
    ("weight a string", lambda r: r.__setitem__("weight", "[[1, 0], [0, 1]]"), "weight"),
    ("a bound as a string", lambda r: r["split"]["per_step_bound"].__setitem__(
        0, str(r["split"]["per_step_bound"][0])), "split.per_step_bound[0]"),
    ("a domain corner a boolean", lambda r: r["domain"]["lower"].__setitem__(0, False),
     "domain.lower[0]"),
    ("a grid size a string", lambda r: r["domain"]["shape"].__setitem__(0, "3"),
     "domain.shape[0]"),
    ("schedule name a number", lambda r: r["schedule"].__setitem__("name", 1), "name"),
    ("totals.gdp_mu a string", lambda r: r["totals"].__setitem__("gdp_mu", "1"),
     "totals.gdp_mu"),
])
def test_malformed_fields_are_named(record: dict[str, Any], tmp_path: Path, name: str,
                                    edit: Any, field: str) -> None:
    path = _write(tmp_path, _edit(record, edit))
    with pytest.raises(CertificateError, match=field.replace("[", r"\[").replace("]", r"\]")):
        verify(path)
    assert main(["verify", str(path)]) == 1


def _delta(mu: float, eps: float) -> float:
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


def test_stated_totals_claim_no_more_than_proven(record: dict[str, Any],
                                                 tmp_path: Path) -> None:
    tot = record["totals"]
    mu = math.sqrt(sum(r["q"] for r in record["releases"]))
    assert tot["gdp_mu"] == pytest.approx(mu, rel=1e-12)
    for key, eps in tot["epsilon"].items():  # the honest file: its epsilons are mu-GDP's
        assert _delta(mu, eps) == pytest.approx(float(key), rel=1e-6)
    assert verify(_write(tmp_path, record)).summary["releases"] == 2
    for path, factor in ((("gdp_mu",), 1 - 1e-9), (("bound",), 1 - 1e-9),
                         (("epsilon", "1e-05"), 1 - 1e-9), (("epsilon", "1e-08"), 0.5)):
        def lower(r: dict[str, Any], path: tuple[str, ...] = path, f: float = factor) -> None:
            node = r["totals"]
            for k in path[:-1]:
                node = node[k]
            node[path[-1]] *= f

        bad = _edit(record, lower)
        if path[0] == "epsilon":  # a false claim: delta at the stated epsilon is above delta
            assert _delta(mu, bad["totals"]["epsilon"][path[1]]) > float(path[1])
        with pytest.raises(CertificateError, match="claims more privacy"):
            verify(_write(tmp_path, bad))
    weaker = _edit(record, lambda r: r["totals"].__setitem__("gdp_mu", 2 * mu))
    assert verify(_write(tmp_path, weaker)).summary["releases"] == 2  # a weaker claim holds
