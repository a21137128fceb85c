"""``python -m resolver`` is the ``resolver`` command."""

import sys

from resolver.cli.main import main

sys.exit(main())
