"""``python -m mxkit.core`` prints the plugins and configuration (as ``mxkit info``)."""

import sys

from mxkit.core.info import main

sys.exit(main())
