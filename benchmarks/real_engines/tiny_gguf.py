"""Make tiny llama-architecture GGUF models, and broken variants of them, to provoke llama.cpp's failures.

    python benchmarks/real_engines/tiny_gguf.py --out DIR [--gguf-py PATH] [--big-embd 1024 --big-layers 12]

Needs numpy and the `gguf` package (pip install gguf, or --gguf-py pointing at llama.cpp's gguf-py folder).
No download: the weights are random (seeded) and the tokenizer is a minimal SentencePiece-style ("llama")
vocabulary written into the metadata: <unk>, <s>, </s>, the 256 byte-fallback tokens, and a few hundred
pieces. The model answers gibberish, which is all a startup needs. Written into DIR:

- tiny.gguf: n_embd 64, 2 layers, f32 (about 1 MB); loads in milliseconds;
- big.gguf: n_embd --big-embd, --big-layers layers, f16 (about 300 MB by default), for kills while loading
  and for a context whose KV cache is too large for the memory given;
- badmagic.gguf: tiny.gguf with its first 4 bytes ('GGUF') overwritten;
- truncated.gguf: big.gguf cut in the middle of its tensor data;
- unknownarch.gguf: general.architecture 'frobnicate' (keys frobnicate.*);
- noembd.gguf: llama, but without the required key llama.embedding_length;
- badshape.gguf: blk.0.attn_q.weight written 64x32 where 64x64 is expected;
- missingtensor.gguf: blk.1.ffn_up.weight left out;
- othervocab.gguf: tiny, with a vocabulary of other size and tokens (a draft model that does not match).
"""

from __future__ import annotations

import argparse
import string
import sys
from pathlib import Path

import numpy as np


def vocab(extra: int = 0, seed_word: str = "") -> tuple[list[str], list[float], list[int]]:
    """A minimal SentencePiece vocabulary: specials, byte fallback, single characters and a few words."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256  # unknown, control, control, byte
    pieces = ["\u2581", *string.ascii_letters, *string.digits, *string.punctuation]
    words = [
        "the",
        "of",
        "and",
        "to",
        "in",
        "is",
        "you",
        "that",
        "it",
        "he",
        "was",
        "for",
        "on",
        "are",
        "as",
        "with",
        "his",
        "they",
        "at",
        "be",
        "this",
        "have",
        "from",
        "or",
    ]
    pieces += ["\u2581" + c for c in string.ascii_letters] + ["\u2581" + w for w in words] + words
    pieces += [f"{seed_word}{i}" for i in range(extra)]
    seen: set[str] = set(tokens)
    for p in pieces:
        if p not in seen:
            seen.add(p)
            tokens.append(p)
            types.append(1)
    scores = [0.0] * 259 + [-float(i) for i in range(len(tokens) - 259)]
    # longer pieces score higher, so the merges prefer whole words
    scores = [s + 10.0 * len(t) if ty == 1 else s for s, t, ty in zip(scores, tokens, types, strict=True)]
    return tokens, scores, types


def write(
    path: Path,
    gguf: object,
    *,
    arch: str = "llama",
    n_embd: int = 64,
    n_layer: int = 2,
    n_ff: int | None = None,
    n_head: int = 4,
    n_head_kv: int | None = None,
    rope_dims: int | None = None,
    dtype: type = np.float32,
    ctx: int = 4096,
    skip_keys: tuple[str, ...] = (),
    skip_tensors: tuple[str, ...] = (),
    bad_shapes: dict[str, tuple[int, ...]] | None = None,
    vocab_extra: int = 0,
    vocab_word: str = "",
    seed: int = 0,
) -> None:
    """Write one llama-style GGUF; the keyword arguments make the broken variants."""
    rng = np.random.default_rng(seed)
    n_ff = n_ff or 4 * n_embd
    n_head_kv = n_head_kv or n_head
    n_embd_kv = n_embd // n_head * n_head_kv
    tokens, scores, types = vocab(vocab_extra, vocab_word)
    n_vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), arch)  # type: ignore[attr-defined]
    w.add_name(f"tiny-{arch}-{n_embd}x{n_layer}")
    keys = {
        "context_length": lambda: w.add_context_length(ctx),
        "embedding_length": lambda: w.add_embedding_length(n_embd),
        "block_count": lambda: w.add_block_count(n_layer),
        "feed_forward_length": lambda: w.add_feed_forward_length(n_ff),
        "head_count": lambda: w.add_head_count(n_head),
        "head_count_kv": lambda: w.add_head_count_kv(n_head_kv),
        "rope_dimension_count": lambda: w.add_rope_dimension_count(rope_dims or n_embd // n_head),
        "layer_norm_rms_eps": lambda: w.add_layer_norm_rms_eps(1e-5),
    }
    for key, add in keys.items():
        if key not in skip_keys:
            add()
    w.add_file_type(1 if dtype == np.float16 else 0)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def tensor(name: str, *shape: int, norm: bool = False) -> None:
        if name in skip_tensors:
            return
        shape = (bad_shapes or {}).get(name, shape)
        # numpy shape is (rows, cols) = ggml's (ne1, ne0)
        data = (
            np.ones(shape, dtype=np.float32) if norm else rng.normal(0, 0.02, size=shape).astype(np.float32)
        )
        w.add_tensor(name, data.astype(np.float32 if norm or len(shape) == 1 else dtype))

    tensor("token_embd.weight", n_vocab, n_embd)
    tensor("output_norm.weight", n_embd, norm=True)
    tensor("output.weight", n_vocab, n_embd)
    for i in range(n_layer):
        p = f"blk.{i}."
        tensor(p + "attn_norm.weight", n_embd, norm=True)
        tensor(p + "attn_q.weight", n_embd, n_embd)
        tensor(p + "attn_k.weight", n_embd_kv, n_embd)
        tensor(p + "attn_v.weight", n_embd_kv, n_embd)
        tensor(p + "attn_output.weight", n_embd, n_embd)
        tensor(p + "ffn_norm.weight", n_embd, norm=True)
        tensor(p + "ffn_gate.weight", n_ff, n_embd)
        tensor(p + "ffn_up.weight", n_ff, n_embd)
        tensor(p + "ffn_down.weight", n_embd, n_ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(argv: list[str] | None = None) -> int:
    """Write every model into --out."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument(
        "--gguf-py", type=Path, help="llama.cpp's gguf-py folder, if the gguf package is not installed"
    )
    ap.add_argument("--big-embd", type=int, default=1024)
    ap.add_argument("--big-layers", type=int, default=12)
    ap.add_argument("--only", nargs="*", help="write only these models (names without .gguf)")
    args = ap.parse_args(argv)
    if args.gguf_py:
        sys.path.insert(0, str(args.gguf_py))
    import gguf  # noqa: PLC0415

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    models = {
        "tiny": {},
        "big": {"n_embd": args.big_embd, "n_layer": args.big_layers, "n_head": 16, "dtype": np.float16},
        "unknownarch": {"arch": "frobnicate"},
        "noembd": {"skip_keys": ("embedding_length",)},
        "badshape": {"bad_shapes": {"blk.0.attn_q.weight": (32, 64)}},
        "missingtensor": {"skip_tensors": ("blk.1.ffn_up.weight",)},
        "othervocab": {"vocab_extra": 300, "vocab_word": "w", "seed": 1},
        "badheads": {"n_head_kv": 3},
        "badrope": {"rope_dims": 64},
    }
    for name, kw in models.items():
        if args.only and name not in args.only:
            continue
        write(out / f"{name}.gguf", gguf, **kw)
        print(f"wrote {out / (name + '.gguf')}", file=sys.stderr)
    if not args.only or "badmagic" in args.only:
        data = bytearray((out / "tiny.gguf").read_bytes())
        data[:4] = b"LMAO"
        (out / "badmagic.gguf").write_bytes(bytes(data))
    if not args.only or "truncated" in args.only:
        big = out / "big.gguf"
        size = big.stat().st_size
        with big.open("rb") as src, (out / "truncated.gguf").open("wb") as dst:
            dst.write(src.read(size // 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
