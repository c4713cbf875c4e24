"""Where the repository is, for tests in any folder of ``tests/``."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
