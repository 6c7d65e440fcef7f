"""``python -m cli``: the same program as the ``phalanx`` and ``kubectl-phalanx`` console scripts."""

from cli.program import main

raise SystemExit(main())
