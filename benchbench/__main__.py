import sys

from benchbench.cli import main

# Guarded: multiprocessing's spawn re-imports the main module in each child it starts.
if __name__ == "__main__":
    sys.exit(main())
