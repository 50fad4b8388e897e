"""Tiny models for the search, attention and translate tests, a model directory on disk, and a search by ids.

:func:`tiny_model` is random (seeded); :func:`taught_model` has learnt a little of a toy task
(each source word maps to one target word, in order) in a second, so that its outputs end at
different lengths and its scores are peaked, as a trained model's are.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import torch
import yaml

from rerank.config import to_dict
from rerank.models.architectures import build_model
from rerank.models.batching import pad
from rerank.models.checkpoint import CONFIG, SRC_VOCAB, TRG_VOCAB, WEIGHTS, save_state
from rerank.models.config import AttentionConfig, ModelConfig
from rerank.models.seq2seq import Seq2Seq
from rerank.models.vocab import EOS_ID, SPECIALS, Vocabulary
from rerank.search.beam import SearchConfig
from rerank.search.translate import translate

# (architecture, decoder, input feeding): every decoder style
DECODERS = [("encdec", "bahdanau", False), ("rnnsearch", "bahdanau", False), ("rnnsearch", "luong", False),
            ("rnnsearch", "luong", True)]
SCORES = ["additive", "dot", "general", "location"]
WINDOWS = ["global", "local-m", "local-p"]


def tiny_config(architecture: str = "rnnsearch", decoder: str = "bahdanau", input_feeding: bool = False,
                score: str = "additive", window: str = "global", width: int = 2,
                max_source_length: int = 20) -> ModelConfig:
    """A model of 16 units; the dot score gets an encoder of 8 units per direction to match."""
    return ModelConfig(architecture=architecture, embedding_size=12, hidden_size=16, maxout_size=8,
                       encoder_hidden_size=8 if score == "dot" else None, decoder=decoder,
                       input_feeding=input_feeding,
                       attention=AttentionConfig(score=score, window=window, width=width, hidden_size=16,
                                                 max_source_length=max_source_length))


def tiny_model(config: ModelConfig, src_vocab: int = 30, trg_vocab: int = 25, seed: int = 0,
               dtype: torch.dtype = torch.float64, biases: dict[int, float] | None = None) -> Seq2Seq:
    """A seeded random model in evaluation mode; ``biases`` raise the output logits of some ids
    (default: ``</s>`` by 2, so that hypotheses end at different lengths)."""
    torch.manual_seed(seed)
    model = build_model(config, src_vocab, trg_vocab).to(dtype).eval()
    layer = output_layer(model)
    with torch.no_grad():
        for token, bias in (biases if biases is not None else {EOS_ID: 2.0}).items():
            layer.bias[token] += bias
    return model


def taught_model(config: ModelConfig, updates: int = 60, src_vocab: int = 30, trg_vocab: int = 25,
                 seed: int = 0, dtype: torch.dtype = torch.float32) -> Seq2Seq:
    """:func:`tiny_model` trained (in ``dtype``) on random sentences of 1-8 words, target word
    ``4 + w mod (trg_vocab - 4)`` for source word ``w``; returned in float64. Trained in float64, the model does
    not depend on the rounding of the float32 kernels that the process happens to use."""
    generator = torch.Generator().manual_seed(seed)

    def batches() -> Iterator[tuple[list[list[int]], list[list[int]]]]:
        for _ in range(updates):
            lengths = torch.randint(1, 9, (32,), generator=generator).tolist()
            sources = [torch.randint(4, src_vocab, (n,), generator=generator).tolist() for n in lengths]
            yield sources, [[4 + w % (trg_vocab - 4) for w in s] for s in sources]

    model = tiny_model(config, src_vocab, trg_vocab, seed, dtype=dtype, biases={})
    with torch.random.fork_rng():  # dropout's masks from ``seed`` too, whatever ran before in the process
        torch.manual_seed(seed)
        return teach(model, batches())


def teach(model: Seq2Seq, batches: Iterable[tuple[list[list[int]], list[list[int]]]]) -> Seq2Seq:
    """``model`` trained with Adam on ``batches`` of (sources, targets) ids without ``</s>``;
    returned in float64 and evaluation mode."""
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for sources, targets in batches:
        src, src_len = pad([s + [EOS_ID] for s in sources])
        trg, _ = pad([t + [EOS_ID] for t in targets])
        loss = model(src, src_len, trg) / len(sources)  # −Σ ln p
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.to(torch.float64).eval()


def output_layer(model: Seq2Seq) -> torch.nn.Linear:
    """The layer that gives the logits: W_o of the deep output, or Luong's W_s."""
    layer = getattr(model, "deep_output", None) or model.output
    return layer if isinstance(layer, torch.nn.Linear) else layer.project


def all_models() -> list[tuple[str, ModelConfig]]:
    """One configuration per decoder style, with the attention varied across them."""
    return [(f"{a}-{d}{'-feed' if f else ''}-{s}-{w}", tiny_config(a, d, f, s, w))
            for (a, d, f), s, w in zip(DECODERS, ["additive", "general", "dot", "location"],
                                       ["global", "local-p", "local-m", "global"], strict=True)]


def save_model_dir(directory: Path, model: Seq2Seq, src_vocab: Vocabulary, trg_vocab: Vocabulary) -> Path:
    """``directory`` as :func:`rerank.models.checkpoint.load_model` reads it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / CONFIG).write_text(yaml.safe_dump({"model": to_dict(model.config)}, sort_keys=False))
    src_vocab.save(directory / SRC_VOCAB)
    trg_vocab.save(directory / TRG_VOCAB)
    save_state({"model": model.float().state_dict()}, directory / WEIGHTS)
    return directory


def id_vocabulary(size: int = 30) -> Vocabulary:
    """The specials, then ``w4`` ... ``w<size - 1>``: word ``w<i>`` has id i."""
    return Vocabulary([*SPECIALS, *(f"w{i}" for i in range(len(SPECIALS), size))])


def search_ids(model: Seq2Seq, sources: list[list[int]], nbest: int = 3) -> list[list[tuple[list[int], float]]]:
    """The ``nbest`` hypotheses (ids, score) of each of ``sources`` (ids of :func:`id_vocabulary`), searched by
    :func:`rerank.search.translate.translate` with a beam of 4."""
    vocab = id_vocabulary()
    sentences = [[vocab.tokens[i] for i in source] for source in sources]
    config = SearchConfig(beam_size=4, nbest=nbest)
    return [[(h.tokens, h.score) for h in hypotheses] for hypotheses in translate(model, vocab, sentences, config)]


def tiny_marian(directory: Path, lines: Iterable[str], vocab_size: int = 60, d_model: int = 8, layers: int = 1,
                ffn: int = 16, heads: int = 2, max_positions: int = 256, seed: int = 0) -> Path:
    """A random Marian (OPUS-MT) model and its tokenizer saved with ``save_pretrained`` in ``directory``, as a
    downloaded OPUS-MT model is: a SentencePiece model trained on ``lines`` (both sides share it), its pieces
    in vocab.json with ``<pad>`` last. The ``<pad>`` logit is pushed to -100, as in a trained model, which never
    predicts it: CTranslate2 drops ``<pad>`` from the vocabulary and so from its softmax."""
    import json
    import shutil

    import sentencepiece as spm
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    directory.mkdir(parents=True, exist_ok=True)
    prefix = directory / "spm"
    spm.SentencePieceTrainer.train(sentence_iterator=iter(list(lines)), model_prefix=str(prefix),
                                   vocab_size=vocab_size, model_type="unigram", character_coverage=1.0,
                                   pad_id=-1, bos_id=-1, eos_id=1, unk_id=0, hard_vocab_limit=False,
                                   num_threads=1, minloglevel=2)
    pieces = spm.SentencePieceProcessor(model_file=f"{prefix}.model")
    vocab = {"</s>": 0, "<unk>": 1}
    for piece in (pieces.id_to_piece(i) for i in range(pieces.get_piece_size())):
        vocab.setdefault(piece, len(vocab))
    vocab["<pad>"] = len(vocab)
    for name in ("source.spm", "target.spm"):
        shutil.copy(f"{prefix}.model", directory / name)
    (directory / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    for suffix in (".model", ".vocab"):
        Path(f"{prefix}{suffix}").unlink()
    tokenizer = MarianTokenizer(str(directory / "source.spm"), str(directory / "target.spm"),
                                str(directory / "vocab.json"))
    torch.manual_seed(seed)
    config = MarianConfig(vocab_size=len(vocab), d_model=d_model, encoder_layers=layers, decoder_layers=layers,
                          encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=ffn,
                          decoder_ffn_dim=ffn, max_position_embeddings=max_positions, pad_token_id=len(vocab) - 1,
                          eos_token_id=0, decoder_start_token_id=len(vocab) - 1, forced_eos_token_id=0)
    model = MarianMTModel(config)
    model.final_logits_bias[0, config.pad_token_id] = -100.0
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def ctranslate2_conversion(model: Path, output: Path, quantization: str | None = None) -> Path:
    """The Hugging Face model directory ``model`` converted for CTranslate2 into ``output`` (as
    ``ct2-transformers-converter --copy_files`` does: with the tokenizer's files beside model.bin)."""
    from ctranslate2.converters import TransformersConverter

    files = [path.name for path in model.iterdir() if path.name.endswith((".spm", "vocab.json"))
             or path.name == "tokenizer_config.json"]
    TransformersConverter(str(model), copy_files=files).convert(str(output), quantization=quantization, force=True)
    return output


def tiny_m2m(directory: Path, lines: Iterable[str], seed: int = 0) -> Path:
    """A random M2M-100 model (a multilingual model: its target starts with the language's code, ``__fr__``)
    and its tokenizer saved in ``directory``, its SentencePiece model trained on ``lines``."""
    import json

    import sentencepiece as spm
    from transformers import M2M100Config, M2M100ForConditionalGeneration, M2M100Tokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    directory.mkdir(parents=True, exist_ok=True)
    model_file = directory / "sentencepiece.bpe.model"
    spm.SentencePieceTrainer.train(sentence_iterator=iter(list(lines)), model_prefix=str(model_file.with_suffix("")),
                                   vocab_size=60, model_type="unigram", character_coverage=1.0, pad_id=-1, bos_id=-1,
                                   eos_id=-1, unk_id=0, hard_vocab_limit=False, num_threads=1, minloglevel=2)
    pieces = spm.SentencePieceProcessor(model_file=str(model_file))
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for piece in (pieces.id_to_piece(i) for i in range(pieces.get_piece_size())):
        vocab.setdefault(piece, len(vocab))
    (directory / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tokenizer = M2M100Tokenizer(str(directory / "vocab.json"), str(model_file), src_lang="en", tgt_lang="fr")
    torch.manual_seed(seed)
    config = M2M100Config(vocab_size=256, d_model=8, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                          decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16,
                          max_position_embeddings=256, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                          decoder_start_token_id=2)  # 256 ids: the pieces' and the 100 languages' codes after them
    M2M100ForConditionalGeneration(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
