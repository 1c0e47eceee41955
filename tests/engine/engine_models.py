"""Architectures the engine suites run on: name -> (tiny_models base config, overrides)."""
ARCHS = {
    "qwen2": ("qwen2", {}),
    "mistral": ("mistral", {}),
    "qwen3_5": ("qwen3_5", {}),
    "qwen3_5_moe": ("qwen3_5_moe", {}),
    "mixtral": ("mixtral", {}),
}
