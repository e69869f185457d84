"""``python -m ttg_envs.envs.awm.bundle``: rebuild the bundled AWM scenarios."""

from . import main

raise SystemExit(main())
