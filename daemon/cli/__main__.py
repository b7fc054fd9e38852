"""`python -m daemon.cli`: the same as the `chorus` script."""

import sys

from daemon.cli import main

sys.exit(main())
