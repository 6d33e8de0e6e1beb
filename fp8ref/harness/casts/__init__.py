"""Casts into FP8 and between FP8 formats held to the codec: the casts under test, their inputs, the
comparison, the 2^32 sweep and the named deviations from the definition."""
