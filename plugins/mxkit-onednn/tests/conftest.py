"""The oneDNN plugin's tests share onednn_harness (tests run with --import-mode=importlib)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
