"""The subcommands of ``rerank``, one module each (see :mod:`rerank.cli`)."""
