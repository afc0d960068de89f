"""``python -m lightning_prd.cli``: the ``lightning-prd`` command."""

import sys

from lightning_prd.cli.main import main

sys.exit(main())
