"""The judge of a float8 op that needs none of the install's kernels on float8 bytes: its codes
read from the bytes a tensor stores (``stored``), and a movement's output held to the input bytes
each output byte must be (``movement``). The tracer (``trace.op_checks``) and the native-op
catalogue (``native.native_checks``) call it both, so a kernel fault shared by every one-byte
dtype (a clone of a transposed tensor that flips a byte) cannot hide in the reference."""
