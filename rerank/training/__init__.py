"""Training the models in one loop, with exact resume.

``config``: the training configs of both kinds of model (torch-free), and the one function that picks the class.
``cslm``: the CSLM's part of the loop: its n-gram batches and validation.
``data``: small parallel text in memory, padded batches.
``distributed``: several training processes under ``torchrun``.
``prepare``: training data prepared once into binary shards.
``prepared``: prepared data read back, and the batches of an epoch.
``subword_sampling``: subword regularisation: pairs segmented anew in each batch.
``trainer``: the training loop of every model, and the translation models' part of it.
"""
