"""Training the models: parallel text or phrase pairs as batches (``data``), the settings (``config``,
torch-free) and the maximum-likelihood trainer with exact resume (``trainer``)."""
