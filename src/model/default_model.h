#pragma once
// The embedded default model (models/default/mlx-4bit: a small Qwen3.5-architecture chat model
// trained for this project), used when no --model is given.
#include <string>

namespace sanctum {

// $SANCTUM_DEFAULT_MODEL when set (and then only that); otherwise the first existing of
// <binary dir>/../models/default/mlx-4bit (a build tree or a source checkout),
// <binary dir>/../share/sanctum/models/default/mlx-4bit (an install), and the source tree this binary
// was built from. Throws Error(not_found) listing the places tried.
std::string default_model_dir();

}  // namespace sanctum
