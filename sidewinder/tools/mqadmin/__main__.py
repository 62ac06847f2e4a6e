"""python -m sidewinder.tools.mqadmin: the same as the mqadmin console script."""

from sidewinder.tools.mqadmin import main

raise SystemExit(main())
