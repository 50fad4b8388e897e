"""Models: the two translation architectures (Cho et al.'s encoder-decoder and RNNsearch) and the CSLM, their
torch-free configuration, vocabularies, batching of ids, checkpoints and devices.

``architectures``: the translation architectures by name, and a model built from its configuration.
``attention``: Bahdanau's and Luong's attention scores and Luong's local windows.
``averaging``: the mean of the checkpoints a training run kept.
``batching``: sentences as padded id tensors, and batches of a length-sorted order.
``checkpoint``: a trained model on disk: config, vocabularies and weights.
``config``: the models' configuration (torch-free), and the config class of each architecture.
``cslm``: the continuous-space language model and its combination with a back-off model.
``device``: the device torch runs on, and its CPU threads.
``encdec``: the RNN encoder-decoder of Cho et al. 2014.
``encoder``: the GRU encoder, unidirectional or bidirectional.
``ensemble``: models searched as one.
``layers``: building blocks both architectures share.
``rnnsearch``: RNNsearch (Bahdanau et al. 2014) with Luong et al.'s attention variants.
``seq2seq``: the interface, and the capabilities, of every translation architecture.
``subwords``: sentencepiece subword units inside a model.
``vocab``: word-level vocabularies with a frequency shortlist.
"""
