#!/usr/bin/env python3
"""Dev-time step of the tiny model's recipe (make_tiny.sh): from the per-book KJV files of split_kjv.sh write
   train.jsonl    training books plus synthetic passkey documents, one {"text": ...} per line (a passkey
                  prompt may hold empty lines, so documents cannot be separated by blank lines)
   heldout.jsonl  held-out books
and train a small byte-level BPE tokenizer.json on the training books with Hugging Face `tokenizers`.

The passkey documents teach the tiny model the retrieval format at its own context (each < 256 tokens): the
standard prompt of docs/evaluation-protocol.md with 0..6 filler units, the key line at a random depth, and the
answer. Evaluation at 512..2048 then measures whether retrieval survives the context extension. Deterministic
(fixed seed).
usage: make_corpus.py KJVDIR OUTDIR VOCAB [PASSKEY_DOCS [TOKENIZER]]
  PASSKEY_DOCS  synthetic passkey documents in train.jsonl (default 1500)
  TOKENIZER     an existing tokenizer.json to copy instead of training one (the committed model's)"""
import glob
import json
import os
import shutil
import random
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

TASK = ("There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
        "I will quiz you about the important information there.")
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
QUESTION = "What is the pass key? The pass key is"
HELD_CHARS = 24000


def passkey_doc(rng):
    units = rng.randint(0, 6)
    before = rng.randint(0, units)
    key = rng.randint(10000, 99999)
    pre = " ".join([FILLER] * before)
    post = " ".join([FILLER] * (units - before))
    key_line = f"The pass key is {key}. Remember it. {key} is the pass key."
    return "\n".join([TASK, pre, key_line, post, QUESTION]) + f" {key}."


def main():
    kjv, out, vocab = sys.argv[1], sys.argv[2], int(sys.argv[3])
    n_passkey = int(sys.argv[4]) if len(sys.argv) > 4 else 1500
    given_tokenizer = sys.argv[5] if len(sys.argv) > 5 else None
    os.makedirs(out, exist_ok=True)
    train_books = [open(p, encoding="utf-8").read().strip("\n") for p in sorted(glob.glob(f"{kjv}/train/*.txt"))]
    # Held-out: the first HELD_CHARS characters (whole verses) of each held-out book, ~6k tokens: every document
    # is longer than 2048 tokens, so every evaluated length sees the same text, and an evaluation stays short.
    held_books = []
    for p in sorted(glob.glob(f"{kjv}/heldout/*.txt")):
        lines, size = [], 0
        for line in open(p, encoding="utf-8").read().strip("\n").split("\n"):
            if size + len(line) + 1 > HELD_CHARS:
                break
            lines.append(line)
            size += len(line) + 1
        held_books.append("\n".join(lines))
    rng = random.Random(1611)
    docs = train_books + [passkey_doc(rng) for _ in range(n_passkey)]
    rng.shuffle(docs)
    for name, ds in (("train", docs), ("heldout", held_books)):
        with open(f"{out}/{name}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in ds)

    if given_tokenizer:
        shutil.copyfile(given_tokenizer, f"{out}/tokenizer.json")
        print(f"make_corpus.py: {len(train_books)} books + {n_passkey} passkey documents, {len(held_books)} held-out "
              f"books, tokenizer {given_tokenizer}", file=sys.stderr)
        return
    tok = Tokenizer(models.BPE())
    # Digits one by one: a 5-digit pass key is 5 tokens whatever the merges learned.
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(train_books + [passkey_doc(random.Random(7)) for _ in range(50)], trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                       special_tokens=[("<|begin_of_text|>", 0)])
    tok.save(f"{out}/tokenizer.json")
    print(f"make_corpus.py: {len(train_books)} books + {n_passkey} passkey documents, {len(held_books)} held-out books, "
          f"vocab {tok.get_vocab_size()}", file=sys.stderr)


if __name__ == "__main__":
    main()
