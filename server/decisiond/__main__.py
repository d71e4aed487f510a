"""``python -m decisiond``: the ``decisiond`` command."""

from __future__ import annotations

import sys

from decisiond.entry import main

sys.exit(main())
