"""rerank: neural translation models for Moses, as features, phrase-table scores and a decoder."""

__version__ = "0.1.0"
