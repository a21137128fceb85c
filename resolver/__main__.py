"""``python -m resolver`` is the ``resolver`` command."""

import sys

from resolver.cli import main

sys.exit(main())
