"""Suite-wide settings: a reproducible hypothesis profile on CI (CI=true), exploratory locally."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
