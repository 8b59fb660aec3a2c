"""A byte-level BPE tokenizer trained offline on a corpus generated in code, the same on every machine.

The corpus is pseudo-English: a fixed list of common words plus syllable-built
words, drawn with Zipf-like frequencies by ``random.Random.random`` (whose sequence
Python guarantees), so training it with the ``tokenizers`` library gives the same
``tokenizer.json`` bytes everywhere. Ids 0, 1, 2 are ``<unk>``, ``<s>``, ``</s>``; a
``<s>`` is prepended on encode, like Llama. Saved as ``tokenizer.json`` plus a
``tokenizer_config.json`` that ``transformers.AutoTokenizer`` (and so SGLang) reads.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from sglang_fastpath.models.checkpoint import write_json

UNK, BOS, EOS = "<unk>", "<s>", "</s>"
SPECIALS = (UNK, BOS, EOS)  # ids 0, 1, 2
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
FILES = ("tokenizer.json", "tokenizer_config.json")
CORPUS_CHARS = 3_000_000
LEXICON_SIZE = 40_000
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
_WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but have an "
    "they you were her she there one all we their been has when who will more no if out so said what up its "
    "about than into them can only other new some could time these two may then do first any my now such "
    "like our over man me even most made after also did many before must through back years where much your "
    "way well down should because each just those people how too little state good very make world still own "
    "see men work long get here between both life being under never day same another know while last might "
    "us great old year off come since against go came right used take three model token draft target fast "
    "path graph kernel layer expert cache batch"
).split()
_ONSETS = ("", "b", "br", "c", "ch", "cl", "d", "dr", "f", "fl", "g", "gr", "h", "j", "k", "l", "m", "n", "p",
           "pl", "pr", "qu", "r", "s", "sh", "sk", "sl", "st", "t", "th", "tr", "v", "w", "z")
_NUCLEI = ("a", "e", "i", "o", "u", "ai", "ea", "ee", "ie", "oa", "oo", "ou", "y")
_CODAS = ("", "", "b", "ck", "d", "g", "l", "ll", "m", "n", "nd", "ng", "nt", "p", "r", "rd", "rn", "s", "ss",
          "st", "t", "th", "x")
_ENDINGS = (".", ".", ".", "?", "!", ",", ";", ":")


@dataclass(frozen=True)
class TokenizerInfo:
    size: int
    text_ids: list[int]  # ids that decode to clean text on their own (not special, no partial UTF-8)


def corpus(seed: int = 0, chars: int = CORPUS_CHARS) -> list[str]:
    """Deterministic pseudo-English sentences, about ``chars`` characters in all."""
    rng = random.Random(seed)

    def pick(seq: tuple[str, ...] | list[str]) -> str:
        return seq[int(rng.random() * len(seq))]

    lexicon, seen = list(_WORDS), set(_WORDS)
    while len(lexicon) < LEXICON_SIZE:
        word = "".join(pick(_ONSETS) + pick(_NUCLEI) + pick(_CODAS) for _ in range(1 + int(rng.random() * 3)))
        if word and word not in seen:
            seen.add(word)
            lexicon.append(word)
    lines, total = [], 0
    while total < chars:
        words = [lexicon[int(len(lexicon) ** rng.random()) - 1] for _ in range(5 + int(rng.random() * 15))]
        line = " ".join(words).capitalize() + pick(_ENDINGS)
        if rng.random() < 0.1:
            line += f" {int(rng.random() * 100000)}"
        lines.append(line)
        total += len(line) + 1
    return lines


def train(vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=list(SPECIALS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, BOS_ID)])
    return tok


def text_ids(tok: Tokenizer) -> list[int]:
    size = tok.get_vocab_size()
    return [i for i in range(len(SPECIALS), size) if "\ufffd" not in tok.decode([i])]


def tokenizer_config(max_length: int) -> dict:
    return {
        "add_bos_token": True, "add_eos_token": False, "bos_token": BOS, "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False, "eos_token": EOS, "model_max_length": max_length,
        "pad_token": EOS, "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": UNK,
    }


def save(tok: Tokenizer, folder: Path, max_length: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / FILES[0]).write_text(tok.to_str(pretty=True) + "\n")
    write_json(folder / FILES[1], tokenizer_config(max_length))


def make_tokenizer(vocab_size: int, folders: list[Path], max_length: int) -> TokenizerInfo:
    """Train once and save the same files into every folder (the target's and the draft's)."""
    tok = train(vocab_size)
    for folder in folders:
        save(tok, folder, max_length)
    return TokenizerInfo(tok.get_vocab_size(), text_ids(tok))
