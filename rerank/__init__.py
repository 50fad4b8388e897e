"""rerank: neural translation models for Moses, as features, phrase-table scores and a decoder.

``__main__``: ``python -m rerank``.
``cli``: the ``rerank`` command: its subcommands, logging, and the one place errors become exit status 2.
``config``: configs as frozen dataclasses read from YAML, the one YAML reader, and flags over config keys.
``errors``: the errors a user can cause, each a one-line message.
``processes``: every child process rerank starts.
``progress``: progress bars and summaries on stderr.
"""

__version__ = "0.1.0"
