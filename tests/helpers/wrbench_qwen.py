"""A tiny random-weight Qwen2-VL checkpoint (the real transformers classes, saved and loaded offline): a byte-level
tokenizer whose "Yes" and "No" are single tokens, Qwen's special tokens, a minimal chat template."""

from __future__ import annotations

from pathlib import Path


def save_tiny_qwen2_vl(folder: Path, seed: int = 0) -> Path:
    """Write processor + model into ``folder`` (``save_pretrained``); returns it."""
    import torch
    from transformers import (
        Qwen2TokenizerFast,
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    for w in ("Ye", "Yes", "No"):
        vocab[w] = len(vocab)
    tok = Qwen2TokenizerFast(vocab=vocab, merges=[("Y", "e"), ("Ye", "s"), ("N", "o")])
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                "<|image_pad|>", "<|video_pad|>"]
    tok.add_special_tokens({"additional_special_tokens": specials})
    tok.pad_token = "<|endoftext|>"
    template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% for c in m['content'] %}"
                "{% if c['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>{% else %}{{ c['text'] }}"
                "{% endif %}{% endfor %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                "{% endif %}")
    proc = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(min_pixels=28 * 28, max_pixels=56 * 56),
                            tokenizer=tok, video_processor=Qwen2VLVideoProcessor(min_pixels=28 * 28, max_pixels=56 * 56),
                            chat_template=template)
    ids = {s: tok.convert_tokens_to_ids(s) for s in specials}
    cfg = Qwen2VLConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=1, intermediate_size=64, max_position_embeddings=512,
                         rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
                         bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"]),
        vision_config=dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, in_channels=3),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"])
    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration(cfg)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    proc.save_pretrained(folder)
    return folder
