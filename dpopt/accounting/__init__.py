"""Privacy accounting: budgets, Gaussian differential privacy, Rényi divergences, MI-DP.

- :mod:`~dpopt.accounting.budgets` — ``RDP``, ``ZCDP``, ``GDP``, ``ApproxDP``, ``MIDP``, ``AllOf``:
  each gives the Mahalanobis bound :math:`q` a Gaussian release must meet
  (``budget.mahalanobis_bound()``), and :func:`privacy_report` gives every guarantee of a bound;
- :mod:`~dpopt.accounting.gdp` — trade-off functions, :math:`\\mu \\leftrightarrow (\\varepsilon,
  \\delta)`, composition, subsampling (the central-limit figure, labelled approximate);
- :mod:`~dpopt.accounting.analytic_gaussian` — the exact :math:`(\\varepsilon, \\delta)` curve of
the
  Gaussian mechanism in log form;
- :mod:`~dpopt.accounting.renyi` — Rényi divergences of Gaussian and Laplace laws;
- :mod:`~dpopt.accounting.mi_dp` — mutual-information DP of a binary secret;
- :mod:`~dpopt.accounting.composition` — many (subsampled) Gaussian releases: certified ε/δ by the
  tighter of exact GDP composition, a pessimistic PLD and RDP, and the inverse;
- :mod:`~dpopt.accounting.subsampled_rdp` — RDP of the subsampled Gaussian;
- :mod:`~dpopt.accounting.schedule` — ``Schedule``: a total budget over T releases as a budget;
- :mod:`~dpopt.accounting.dpsgd` — DP-SGD noise-multiplier calibration (two-sided);
- :mod:`~dpopt.accounting.events` — dp-accounting ``DpEvent`` runs and the stateful
  ``PrivacyAccountant``.
"""

from __future__ import annotations

from dpopt._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    **{n: "dpopt.accounting.budgets" for n in (
        "AllOf", "ApproxDP", "BoundOverflowError", "Budget", "GDP", "MIDP", "PrivacyReport", "RDP",
        "ZCDP", "approx_dp_bound", "mi_binary", "mi_binary_inverse", "parse_budget",
        "privacy_report",
    )},
    **{n: "dpopt.accounting.gdp" for n in (
        "clt_mu_poisson", "clt_mu_uniform", "compose", "delta_for_epsilon", "epsilon_for_delta",
        "epsilon_for_log_delta", "gaussian_sigma", "log_delta_for_epsilon", "mu_for",
        "mu_for_log_delta", "rdp_to_dp_improved", "rdp_to_dp_mironov", "tradeoff",
    )},
    **{n: "dpopt.accounting.composition" for n in (
        "AccountingResult", "GaussianSteps", "NoiseCalibration", "calibrate_noise",
        "composed_delta", "composed_epsilon", "largest_bound", "lower_delta", "lower_epsilon",
        "smallest_noise_multiplier",
    )},
    **{n: "dpopt.accounting.events" for n in (
        "PrivacyAccountant", "event_delta", "event_epsilon", "event_relation", "event_to_steps",
    )},
    "Schedule": "dpopt.accounting.schedule",
    "subsampled_gaussian_rdp": "dpopt.accounting.subsampled_rdp",
    **{n: "dpopt.accounting.dpsgd" for n in (
        "DpsgdCalibration", "dpsgd_noise_multiplier", "dpsgd_steps",
    )},
    **{n: "dpopt.accounting.renyi" for n in (
        "gaussian_log_moment", "gaussian_log_moment_mv", "kl_gaussian", "kl_laplace",
        "laplace_log_moment", "renyi_gaussian", "renyi_gaussian_mv", "renyi_laplace",
    )},
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports("dpopt.accounting", _EXPORTS, globals())
