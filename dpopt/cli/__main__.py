"""``python -m dpopt.cli`` runs the ``dpopt`` command."""

import sys

from dpopt.cli.main import main

sys.exit(main())
