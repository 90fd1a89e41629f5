"""``python -m rapidrl ...``: the same as the ``rapidrl`` command (``rapidrl.cli:main``).

Useful where the console script is not on ``PATH`` (a venv that is not activated, or a second
Python), and it makes sure the command runs with this interpreter.
"""

from __future__ import annotations

import sys

from rapidrl.cli import main

if __name__ == "__main__":
    sys.exit(main())
