"""Feature functions for n-best rescoring: one module per kind, and the registry that builds them from YAML.

A feature is described in YAML as a mapping with ``kind`` plus the keys of that kind's ``Config``::

    features:
      - {kind: kenlm, name: LM1, path: lm/train.fr.4.arpa}
      - {kind: word-penalty, name: WP1}
      - {kind: nmt, model: runs/encdec-small}      # RNN0 (RNNsearch0 for an RNNsearch model)
      - {kind: nmt, model: [runs/s1, runs/s2], name: Ens0}   # an ensemble's ln p
      - {kind: cslm, model: runs/cslm, lm: lm/train.fr.4.arpa}   # CSLM0
      - {kind: mbr, metric: chrf}                  # MBRchrf0: expected chrF against the rest of the list
      - {kind: hf, model: opus-mt-en-fr, source_language: en, target_language: fr}   # HF0

Each kind is a class with a ``Config`` dataclass that implements :class:`rerank.rescore.feature.Feature`;
:mod:`rerank.features.registry` lists them. The folder sits at the top of the repository and is
installed as ``rerank.features``: it depends on ``rerank``, and ``rerank`` reaches it only from
its commands, at run time.

``cslm``: the CSLM's ln p of a hypothesis.
``ctranslate2``: a model converted for CTranslate2: its ln p(hypothesis | source).
``hf``: a Hugging Face translation model's ln p(hypothesis | source).
``language_model``: an n-gram language model through KenLM, as Moses' KENLM feature.
``mbr``: consensus features: expected BLEU or chrF against the rest of the list.
``nmt``: a translation model's ln p(hypothesis | source), one model or an ensemble.
``phrase_table``: a feature's ln p as a phrase table's new column (``score-table --feature``).
``pretrained``: what ``hf`` and ``ctranslate2`` share: Moses' text detokenized for the model's tokenizer.
``registry``: every feature kind by its YAML name.
``word_penalty``: Moses' word penalty, and the count of words outside a shortlist.
"""
