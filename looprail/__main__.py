"""`python -m looprail`: the same command line as the `looprail` script."""

import sys

from looprail.cli import main

sys.exit(main())
