"""A decoder's text side: its tokenizers (GGUF byte-level BPE, SentencePiece, a folder's
tokenizer.json) and its chat prompt."""
