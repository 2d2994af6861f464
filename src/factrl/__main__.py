"""``python -m factrl``: the command line where the ``factrl`` script is not installed
(a checkout on ``PYTHONPATH``, e.g. a GPU machine with no network)."""

from factrl.cli import main

if __name__ == "__main__":
    main()
