"""``python -m peach2``: the ``peach2`` command (:mod:`peach2.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
