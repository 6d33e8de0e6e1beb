"""torchao in fp8ref's terms: its float8, MX and NVFP4 casts, recipes and configs."""
