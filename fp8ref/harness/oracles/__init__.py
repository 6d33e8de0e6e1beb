"""The independent answers the codec is held to: the definition itself and gfloat."""
