"""Private sampling with the ideal denoiser (uses :mod:`dpopt.covariance` and
:mod:`dpopt.accounting`, never the reverse).

- :mod:`~dpopt.diffusion.schedules` — noise schedules :math:`a_t` (linear, cosine);
- :mod:`~dpopt.diffusion.sets` — the sensitivity set of one release, exactly reduced on a grid;
- :mod:`~dpopt.diffusion.sampler` — :func:`sample_private` (DDIM / DDPM, every release at its
  certified optimal covariance), the budget split, the baselines;
- :mod:`~dpopt.diffusion.record` — the run record and :func:`verify_record`;
- :mod:`~dpopt.diffusion.quality` — sample quality and memorisation measures;
- :mod:`~dpopt.diffusion.trajectory` — :func:`diffusion_run`, a deterministic sampling
  trajectory as T releases for :func:`dpopt.covariance.run_design.design_run`.
"""

from __future__ import annotations

from dpopt._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    **{n: "dpopt.diffusion.schedules" for n in ("Schedule", "as_schedule", "cosine_schedule",
                                                 "linear_schedule")},
    **{n: "dpopt.diffusion.sets" for n in ("GridReduction", "grid_reduction", "release_set")},
    **{n: "dpopt.diffusion.sampler" for n in (
        "ClampWarning", "PrivateSamples", "budget_spec", "propagation_factors",
        "sample_nonprivate", "sample_private", "snap_to_domain", "split_budget", "step_update",
    )},
    **{n: "dpopt.diffusion.record" for n in ("RunVerification", "load_record", "save_record",
                                              "verify_record")},
    **{n: "dpopt.diffusion.data" for n in ("DATASETS", "PUBLIC_BOUNDS", "PairData", "load_pair")},
    **{n: "dpopt.diffusion.quality" for n in ("energy_distance", "nearest_record_distance",
                                               "sliced_wasserstein")},
    **{n: "dpopt.diffusion.trajectory" for n in ("DiffusionRun", "diffusion_run")},
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports("dpopt.diffusion", _EXPORTS, globals())
