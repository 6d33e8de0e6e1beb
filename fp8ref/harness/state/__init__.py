"""Where training keeps and moves FP8 numbers: checkpoints, copies and resume,
parameters converted for float8 training, layers under autocast, FP8 optimizer state."""
