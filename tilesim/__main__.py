import sys

from tilesim.cli import main

sys.exit(main())
