import sys

from prefshap_core.cli import main

sys.exit(main())
