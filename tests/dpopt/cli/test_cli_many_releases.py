"""``dpopt account dpsgd``, ``account schedule``, ``design-run`` and whole step counts."""

from __future__ import annotations

import json
import math

import mpmath as mp
import pytest

from dpopt.cli import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    code, out, err = run([*argv, "--json", "-q"], capsys)
    assert code == 0, err
    return json.loads(out)


def test_subsample_epochs_gives_whole_steps(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["account", "subsample", "--sampling", "poisson",
                        "--dataset-size", "60000", "--batch-size", "256",
                        "--sigma", "1.1", "--epochs", "60", "--no-certified", "-q"], capsys)
    assert code == 0
    assert "T=14063" in out and "14062.5" not in out


def test_subsample_prints_certified_beside_clt(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_json(["account", "subsample", "--sampling", "poisson",
                    "--rate", "0.05", "--sigma", "1.2", "--steps", "40",
                    "--delta", "1e-5"], capsys)
    cert = res["certified"][0]
    clt_eps = res["privacy"]["epsilon_for_delta"][0]["epsilon"]
    assert cert["accountant"] in ("pld", "rdp") and cert["epsilon"] >= clt_eps * 0.9


def test_account_dpsgd_json(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_json(["account", "dpsgd", "--sampling", "poisson",
                    "--dataset-size", "1000", "--batch-size", "50",
                    "--steps", "100", "--epsilon", "2", "--delta", "1e-5",
                    "--discretization", "1e-3"], capsys)
    assert res["steps"] == 100 and res["sampling_rate"] == 0.05
    assert res["certified_epsilon"] <= 2.0
    assert res["clt"]["approximate"] is True
    assert res["clt"]["noise_multiplier"] < res["noise_multiplier"]


def test_account_dpsgd_text_labels_the_clt(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["account", "dpsgd", "--sampling", "poisson",
                        "--dataset-size", "1000", "--batch-size", "50",
                        "--epochs", "2.5", "--epsilon", "2", "--delta", "1e-5",
                        "--discretization", "1e-3", "-q"], capsys)
    assert code == 0 and "T=50 steps" in out and "APPROXIMATE" in out


def test_account_schedule_exact_without_sampling(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_json(["account", "schedule", "--epsilon", "1", "--delta", "1e-6", "--steps",
                    "10"], capsys)
    assert res["accountant"] == "gdp-exact"
    mp.mp.dps = 30
    mu = mp.sqrt(10 * mp.mpf(res["mahalanobis_bound"]))
    delta = mp.ncdf(mu / 2 - 1 / mu) - mp.e * mp.ncdf(-mu / 2 - 1 / mu)
    assert float(delta) <= 1e-6
    assert res["noise_multiplier"] == pytest.approx(1 / math.sqrt(res["mahalanobis_bound"]))


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["account", "dpsgd", "--sampling", "poisson",
          "--dataset-size", "100", "--batch-size", "10", "--steps", "2.5",
          "--epsilon", "1", "--delta", "1e-5"], "--steps"),
        (["account", "dpsgd", "--sampling", "poisson",
          "--dataset-size", "100", "--batch-size", "10", "--steps", "0",
          "--epsilon", "1", "--delta", "1e-5"], "--steps"),
        (["account", "dpsgd", "--sampling", "poisson",
          "--dataset-size", "100", "--batch-size", "10", "--steps", "5",
          "--epsilon", "1", "--delta", "1"], "--delta"),
        (["account", "schedule", "--epsilon", "1", "--delta", "1e-5", "--steps", "5",
          "--rate", "0"], "--rate"),
        (["account", "subsample", "--sampling", "poisson",
          "--rate", "0.1", "--sigma", "1", "--steps", "3.5"], "--steps"),
        (["account", "dpsgd", "--sampling", "poisson",
          "--dataset-size", "100", "--batch-size", "200", "--steps", "5",
          "--epsilon", "1", "--delta", "1e-5"], "batch_size"),
        (["design-run", "--steps", "2", "--budget", "midp:kappa=0.1"], "budget"),
    ],
)
def test_bad_input_is_one_named_line(argv: list[str], needle: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(argv, capsys)
    assert code == 2
    assert "Traceback" not in err and needle in err


def test_design_run_json(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_json(["design-run", "--steps", "4", "--domain", "grid:lo=0,hi=1,n=3,d=2",
                    "--data-size", "5", "--budget", "gdp:mu=0.5"], capsys)
    assert len(res["steps"]) == 4
    assert sum(s["bound"] for s in res["steps"]) <= 0.25
    assert res["total_error"] <= res["equal_split_error"] * (1 + 1e-9)
    assert res["certified_lower"] <= res["total_error"]


def test_subsample_uniform_is_certified_by_the_symmetrised_pld(
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["account", "subsample", "--sampling", "without_replacement", "--rate", "0.05",
            "--sigma", "1.2", "--steps", "30", "--delta", "1e-5"]
    res = run_json(argv, capsys)
    assert res["certified"][0]["accountant"] == "pld"
    # tighter than the RDP-only answer, which stays available
    rdp = run_json([*argv, "--accountant", "rdp"], capsys)
    assert rdp["certified"][0]["accountant"] == "rdp"
    assert res["certified"][0]["epsilon"] < rdp["certified"][0]["epsilon"]


# ----------------------------------------------------------------------------- schemes (#22)


def test_shuffling_is_refused_with_the_safe_schemes_named(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["account", "dpsgd", "--dataset-size", "1000", "--batch-size", "10",
                        "--steps", "10", "--epsilon", "1", "--delta", "1e-5", "--sampling",
                        "shuffling"], capsys)
    assert code == 2
    assert "no tight" in err and "poisson" in err and "without_replacement" in err


def test_dpsgd_states_scheme_relation_and_interval(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_json(["account", "dpsgd", "--sampling", "poisson",
                    "--dataset-size", "5000", "--batch-size", "100",
                    "--steps", "100", "--epsilon", "2", "--delta", "1e-5", "--discretization",
                    "1e-3"], capsys)
    assert res["sampling"] == "poisson" and res["relation"] == "add_remove"
    lo, hi = res["certified_interval"]
    assert 0 < lo <= hi == res["noise_multiplier"]
    rdp = run_json(["account", "dpsgd", "--sampling", "poisson",
                    "--dataset-size", "5000", "--batch-size", "100",
                    "--steps", "100", "--epsilon", "2", "--delta", "1e-5", "--accountant",
                    "rdp"], capsys)
    assert rdp["accountant"] == "rdp" and rdp["noise_multiplier"] >= hi


def test_subsample_prints_certified_delta_and_subsampled_rdp(
        capsys: pytest.CaptureFixture[str]) -> None:
    res = run_json(["account", "subsample", "--sampling", "poisson",
                    "--rate", "0.05", "--noise-multiplier", "1.2",
                    "--steps", "40", "--epsilon", "2", "--alpha", "4"], capsys)
    (row,) = res["certified_delta"]
    assert row["epsilon"] == 2 and 0 <= row["certified_interval"][0] <= row["delta"] <= 1
    (rdp,) = res["certified_rdp"]
    # the subsampled mechanism's own curve (not the CLT Gaussian's), composed over T = 40
    from dpopt.accounting.subsampled_rdp import subsampled_gaussian_rdp

    assert rdp["epsilon"] == pytest.approx(40 * float(
        subsampled_gaussian_rdp(1 / 1.2**2, 0.05, [4.0], "poisson")[0]), rel=1e-6)


def test_compose_overflow_names_the_users_parameter(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["account", "compose", "1e200", "1"], capsys)
    assert code != 0 and "mus=" in err and "bound=inf" not in err


def test_huge_step_counts_answer_with_rdp(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_json(["account", "dpsgd", "--sampling", "poisson",
                    "--dataset-size", "60000", "--batch-size", "256",
                    "--steps", "99999999999999999999", "--epsilon", "3", "--delta", "1e-5"],
                   capsys)
    assert res["accountant"] == "rdp" and math.isfinite(res["noise_multiplier"])
    assert res["steps"] == 10**20 and res["certified_epsilon"] <= 3.0
