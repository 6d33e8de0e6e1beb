"""FP8 and FP4 GEMMs: what a device's torch._scaled_mm does (accumulator, kernels, FP4 block
scales) and the small training problem the profile pins."""
