"""Import paths removed by the package layout come back as thin aliases that warn.

Each old module is imported afresh (in a subprocess, so the one-time import warning is seen
whatever other tests imported before) and must warn ``DeprecationWarning`` naming its new home,
at the line of the user's import, and hand out the very objects of the new module. The code of
the earlier README, which used these paths, runs to the end with warnings only.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

#: old module -> (new module, names that must be the same objects)
MOVED = {
    "dpopt.sensitivity": ("dpopt.covariance.sensitivity",
                          ("TwoRecordVectors", "add_remove_set", "uniform_query_set")),
    "dpopt.budgets": ("dpopt.accounting.budgets", ("ApproxDP", "parse_budget", "mi_binary")),
    "dpopt.domains": ("dpopt.covariance.domains", ("Grid", "Box", "FinitePoints")),
    "dpopt.design": ("dpopt.covariance.design", ("Design", "design_covariance")),
    "dpopt.program": ("dpopt.covariance.program", ("isotropic_baseline",)),
    "dpopt.gdp": ("dpopt.accounting.gdp", ("compose", "mu_for")),
    "dpopt.renyi": ("dpopt.accounting.renyi", ("gaussian_log_moment",)),
    "dpopt.denoiser": ("dpopt.covariance.denoiser", ("posterior_mean",)),
    "dpopt.privacy": ("dpopt.covariance.privacy", ("privacy_of",)),
    "dpopt.mechanisms": ("dpopt.covariance.mechanisms", ("GaussianMechanism",)),
    "certificates._errors": ("certificates.errors", ("CertificateError", "DpoptError")),
    "certificates._validate": ("certificates.validate", ("as_scalar",)),
}


def _python(code: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as a user's script (a file, so warnings show its source lines)."""
    script = tmp / "user_code.py"
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-W", "always::DeprecationWarning", str(script)],
                          capture_output=True, text=True, env=env, cwd=tmp, timeout=300)


def test_every_old_module_warns_at_the_import_line_and_forwards(tmp_path: Path) -> None:
    lines = ["import importlib"]
    for old, (new, names) in MOVED.items():
        lines += [f"import {old} as old_mod  # import of {old}",
                  f"new_mod = importlib.import_module({new!r})"]
        lines += [f"assert old_mod.{n} is new_mod.{n}, {n!r}" for n in names]
    res = _python("\n".join(lines), tmp_path)
    assert res.returncode == 0, res.stderr
    for old, (new, _) in MOVED.items():
        assert f"the module {old} is deprecated" in res.stderr
        assert f"import from {new}" in res.stderr
        assert f"import {old} as old_mod  # import of {old}" in res.stderr  # the user's line
    assert "removed in dpopt 0.6" in res.stderr


def test_old_modules_do_not_warn_until_imported(tmp_path: Path) -> None:
    res = _python("import dpopt, dpopt.covariance, dpopt.accounting, certificates.errors",
                  tmp_path)
    assert res.returncode == 0 and "DeprecationWarning" not in res.stderr


def test_design_problem_and_the_old_program_methods_warn_and_agree() -> None:
    from certificates.covariance import check
    from dpopt.accounting.budgets import ZCDP
    from dpopt.covariance.design import design_covariance
    from dpopt.covariance.program import isotropic_baseline
    from solvers.api import solve

    with pytest.warns(DeprecationWarning, match="dpopt.covariance.program"):
        sys.modules.pop("dpopt.program", None)
        old = importlib.import_module("dpopt.program")
    s = np.array([[1.0, 1, 1], [1, 1, -1], [1, -1, 1], [1, -1, -1]])
    w = np.array([[2, 0.5, 0], [0.5, 1, 0.2], [0, 0.2, 0.5]])
    prog = old.CovarianceProgram(s, w, 1.0)
    with pytest.warns(DeprecationWarning, match=r"solvers\.api\.solve"):
        sol = prog.solve(method="structured")
    ref = solve(prog, method="structured")
    np.testing.assert_array_equal(sol.covariance, ref.covariance)
    with pytest.warns(DeprecationWarning, match="certificates.covariance.check"):
        cert = prog.check(sol.covariance, sol.dual)
    assert cert.upper == check(prog, sol.covariance, sol.dual).upper
    with pytest.warns(DeprecationWarning, match="isotropic_baseline"):
        assert prog.isotropic()[0] == isotropic_baseline(prog)[0]
    with pytest.warns(DeprecationWarning, match="the program itself"):
        assert prog.problem is prog
    design = design_covariance(s, ZCDP(0.5), weight=w)
    with pytest.warns(DeprecationWarning, match="Design.program"):
        assert design.problem is design.program
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert design.program.count == 4  # the new names never warn


def test_the_old_program_type_name_warns() -> None:
    import certificates.problem as problem

    with pytest.warns(DeprecationWarning, match="CovarianceProgram"):
        assert problem.CovarianceProblem is problem.CovarianceProgram
    with pytest.raises(AttributeError):
        problem.NoSuchName  # noqa: B018


def test_the_replacement_bound_alias_is_four_times_the_add_remove_sup(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        from dpopt.sensitivity import replacement_bound
        assert replacement_bound(0.25) == 1.0 and replacement_bound(0.0) == 0.0
    """)
    res = _python(code, tmp_path)
    assert res.returncode == 0, res.stderr


#: Code of the README before the package layout (its examples, as users copied them).
OLD_README = textwrap.dedent("""
    import numpy as np
    from dpopt.budgets import AllOf, ApproxDP, GDP, RDP, parse_budget, privacy_report
    from dpopt.design import design_covariance
    from dpopt.domains import Box, FinitePoints, Grid
    from dpopt.gdp import compose, epsilon_for_delta, mu_for
    from dpopt.denoiser import posterior_mean
    from dpopt.privacy import privacy_of
    from dpopt.program import CovarianceProgram
    from dpopt.sensitivity import add_remove_set, sup_mahalanobis, uniform_query_set
    from certificates.covariance import check

    budget = AllOf(ApproxDP(epsilon=1.0, delta=1e-6), RDP(alpha=[2, 4, 8], epsilon=[1, 1.5, 2]))
    assert parse_budget("approx:epsilon=1,delta=1e-6&rdp:alpha=2;4;8,epsilon=1;1.5;2") == budget
    q = budget.mahalanobis_bound()
    assert privacy_report(q).satisfies(budget)
    assert abs(compose(3.0, 4.0) - 5.0) < 1e-12
    grid = Grid(np.zeros(2), np.ones(2), (4, 4))
    vectors = add_remove_set(grid, query=[0.3, 0.6], sigma=0.4)
    design = design_covariance(vectors, [ApproxDP(1.0, 1e-6), GDP(1.0)])
    assert design.certified
    assert privacy_of(design.covariance, vectors).epsilon(1e-6) <= 1.0
    assert sup_mahalanobis(vectors, design.covariance).value <= design.bound
    prog = CovarianceProgram(np.eye(3), None, 1.0)
    sol = prog.solve()
    assert prog.check(sol.covariance, sol.dual).certified
    print("old code ran")
""")


def test_code_written_against_the_earlier_readme_runs_with_warnings(tmp_path: Path) -> None:
    res = _python(OLD_README, tmp_path)
    assert res.returncode == 0, res.stderr
    assert "old code ran" in res.stdout
    assert res.stderr.count("DeprecationWarning") >= 8
