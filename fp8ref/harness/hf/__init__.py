"""transformers in fp8ref's terms: its fine-grained FP8 (block-scaled checkpoints) as the implementation under test."""
