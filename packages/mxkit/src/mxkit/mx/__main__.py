"""``python -m mxkit.mx`` runs the ``mxkit`` command line."""

import sys

from mxkit.mx.cli import main

sys.exit(main())
