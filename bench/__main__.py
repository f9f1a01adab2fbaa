"""python -m bench NAME [flags]: run one benchmark by name (step when none is given)."""
import sys

from bench import main

sys.exit(main(sys.argv[1:]))
