"""What the lab's trained models share between training, PyTorch evaluation and the engine's `inferlab eval`.

Tokens: the UTF-8 bytes of the text (ids 0..255), BOS = 256, EOS = 257, PAD = 258; the vocabulary is
264 (a multiple of 8; ids 259..263 unused). Written beside every model as byte_tokenizer.json, which
`inferlab eval` reads.

Windows (the one definition of perplexity here, shared with experiments/src/evaluate.cpp): the text's
bytes are cut into consecutive pieces of WINDOW bytes (the last one shorter); each piece is one
sequence [BOS, b0 .. b(n-2)] whose n positions predict b0 .. b(n-1). Every byte of the file is
predicted exactly once, from at most WINDOW - 1 bytes before it in its piece. Training samples the
same shape at random offsets.
"""
import json
import os

VOCAB = 264
BOS, EOS, PAD = 256, 257, 258
WINDOW = 512

TOKENIZER = {"type": "bytes", "vocab_size": VOCAB, "bos_token_id": BOS, "eos_token_id": EOS,
             "pad_token_id": PAD, "window": WINDOW,
             "note": "token = UTF-8 byte (0..255); a sequence is [BOS] + bytes; scripts/train/common.py"}


def read_bytes(path):
    if not os.path.isfile(path):
        raise SystemExit(f"{path}: no such corpus file (scripts/train/corpus.py writes it)")
    with open(path, "rb") as f:
        return f.read()


def windows(data: bytes, window=WINDOW, max_tokens=0):
    """[(input ids, target ids)] as the engine's eval cuts them; max_tokens > 0: the first pieces only."""
    out, taken = [], 0
    for start in range(0, len(data), window):
        piece = list(data[start:start + window])
        if max_tokens and taken + len(piece) > max_tokens:
            piece = piece[:max_tokens - taken]
        if not piece:
            break
        out.append(([BOS] + piece[:-1], piece))
        taken += len(piece)
        if max_tokens and taken >= max_tokens:
            break
    return out


def llama_config(transformers, hidden, layers, heads, kv_heads, intermediate, tie=False):
    return transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=hidden // heads,
        max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=tie,
        bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD, attention_bias=False, mlp_bias=False,
        hidden_act="silu", initializer_range=0.02, torch_dtype="bfloat16")


# The model family (scripts/train/train.py): a target of about 20 M parameters with GQA (8 query heads
# sharing 2 KV heads, head dim 64) and a draft under 1/8 of it (4 heads, 2 KV heads, tied embeddings).
TARGET = dict(hidden=512, layers=8, heads=8, kv_heads=2, intermediate=1152)
DRAFT = dict(hidden=256, layers=4, heads=4, kv_heads=2, intermediate=512, tie=True)


def write_tokenizer(folder):
    with open(os.path.join(folder, "byte_tokenizer.json"), "w") as f:
        json.dump(TOKENIZER, f, indent=2)
        f.write("\n")
