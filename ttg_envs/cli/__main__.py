"""``python -m ttg_envs.cli``: the ``ttg`` command."""

import sys

from . import main

sys.exit(main())
