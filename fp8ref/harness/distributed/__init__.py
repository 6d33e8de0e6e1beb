"""FP8 training spread over processes: FSDP2's float8 all-gather (and TP) held to the unsharded
model and the reference's cast."""
