"""The offline model factory: target/draft pairs made from a seed, in Hugging Face format.

Nothing is downloaded. Each kind (``tiny``, ``oracle``, ``dense``, ``kimi``) has its
own module exposing ``add_arguments(parser)``, ``spec_from_args(args)`` and
``make(out, spec, seed, device)``; the shared pieces are the tokenizer, the
safetensors writer, the architectures (Llama, EAGLE-3 draft, DeepSeek-V3), INT4
packing and the oracle wiring that lets a draft predict its target exactly.
"""

KINDS = ("tiny", "oracle", "dense", "kimi")
