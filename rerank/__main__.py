import sys

from rerank.cli import main

sys.exit(main())
