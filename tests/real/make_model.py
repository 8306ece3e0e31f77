"""Make the real tier's tiny model: a Llama with random weights and a 512-token BPE vocabulary.

python make_model.py OUT_DIR   (run with the image's venv: transformers, tokenizers, torch)

2 layers, hidden 128, 2 heads of dimension 64 (vLLM's CPU attention refuses 16), bf16,
saved as several safetensors shards (so one shard can be damaged on one node), with a
chat template so /v1/chat/completions answers. No model hub is involved.
"""

import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

out = sys.argv[1]
torch.manual_seed(0)

corpus = [
    "Two small computers sit side by side and share one model between them.",
    "The engine reads its weights, warms up, and answers a request with tokens.",
    "A haiku about a GPU: silicon hums, numbers flow like rain, the answer arrives.",
    "Unified memory holds the weights, the cache, and the operating system together.",
] * 50
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(
    vocab_size=512,
    special_tokens=["<s>", "</s>"],
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
)
tok.train_from_iterator(corpus, trainer)
fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")
fast.chat_template = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
fast.save_pretrained(out)

config = LlamaConfig(
    vocab_size=512,
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=2,
    head_dim=64,
    max_position_embeddings=2048,
    bos_token_id=0,
    eos_token_id=1,
    tie_word_embeddings=False,
)
model = LlamaForCausalLM(config).to(torch.bfloat16)
model.save_pretrained(out, safe_serialization=True, max_shard_size="300KB")
print("made", out)
