"""Make a tiny random Llama checkpoint with its tokenizer, offline, for real engine launches on a CPU.

    python benchmarks/real_engines/tiny_hf_model.py DIR [--vocab 1000] [--hidden 64] [--layers 2]

Writes DIR/config.json, DIR/model.safetensors, DIR/generation_config.json and a fast tokenizer (a word-level
vocabulary built from a few sentences plus filler words, wrapped in PreTrainedTokenizerFast, with a chat
template) so that `vllm serve DIR` or `sglang.launch_server --model-path DIR` load it with no download. Run it
with the engine's own Python (it needs torch, transformers and tokenizers). The weights are random: the model
answers nonsense, which is all a startup log needs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

TEXT = (
    "the quick brown fox jumps over the lazy dog . hello world , how are you today ? "
    "a tiny model for startup logs answers nonsense but it loads and serves ! "
)
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} </s> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)


def make(out: Path, *, vocab: int = 1000, hidden: int = 128, layers: int = 2, heads: int = 4) -> None:
    """Write the checkpoint and tokenizer into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    specials = ["<unk>", "<s>", "</s>", "<pad>", "<|user|>", "<|assistant|>", "<|system|>"]
    words = list(dict.fromkeys(specials + TEXT.split()))
    words += [f"w{i}" for i in range(vocab - len(words))]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = 2048
    fast.save_pretrained(out)
    # config and weights written by hand (no transformers model class: its import pulls torchvision, which a
    # mismatched wheel can break; the checkpoint is the same as LlamaForCausalLM.save_pretrained would write)
    inter = hidden * 2
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": len(words),
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "head_dim": hidden // heads,
        "hidden_act": "silu",
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "mlp_bias": False,
        "initializer_range": 0.02,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 3,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "use_cache": True,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    gen = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3}
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n", encoding="utf-8")
    g = torch.Generator().manual_seed(0)

    def w(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * 0.02).contiguous()

    tensors = {"model.embed_tokens.weight": w(len(words), hidden), "lm_head.weight": w(len(words), hidden)}
    tensors["model.norm.weight"] = torch.ones(hidden)
    for i in range(layers):
        p = f"model.layers.{i}."
        for n in ("q", "k", "v", "o"):
            tensors[f"{p}self_attn.{n}_proj.weight"] = w(hidden, hidden)
        tensors[f"{p}mlp.gate_proj.weight"] = w(inter, hidden)
        tensors[f"{p}mlp.up_proj.weight"] = w(inter, hidden)
        tensors[f"{p}mlp.down_proj.weight"] = w(hidden, inter)
        tensors[f"{p}input_layernorm.weight"] = torch.ones(hidden)
        tensors[f"{p}post_attention_layernorm.weight"] = torch.ones(hidden)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and write the model."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    args = ap.parse_args(argv)
    make(args.out, vocab=args.vocab, hidden=args.hidden, layers=args.layers)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
