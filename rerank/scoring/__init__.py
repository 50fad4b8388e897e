"""Scoring with a trained model: forced-decoding scores of pairs and of whole phrase tables.

``pairs``: forced-decoding scores of (source, target) pairs.
``ray_table``: a phrase table scored on a Ray cluster.
``table``: a model's score appended to every phrase pair of a phrase table.
"""
