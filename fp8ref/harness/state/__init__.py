"""Where training keeps and moves FP8 numbers: checkpoints and copies, and layers under autocast."""
