"""``python hack/localcluster`` (or ``python -m localcluster`` with ``hack/`` on the path): ``hack/cluster``.

Run as a directory, Python puts the package's own directory first on ``sys.path``; it is replaced by
``hack/`` so the package imports by its name and its modules never shadow anything as top-level names.
"""

import sys
from pathlib import Path

if not __package__:
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from localcluster.cli import main

sys.exit(main())
