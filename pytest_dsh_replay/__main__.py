"""``python -m pytest_dsh_replay``: the ``dsh-replay`` command."""

from .cli import main

raise SystemExit(main())
