"""The independent answers the codec is held to: the definition itself and gfloat; and
delayed scaling's, computed from its window."""
