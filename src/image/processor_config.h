#pragma once
// The checkpoint's preprocessor_config.json for the Qwen2-VL image processor family (Qwen2-VL,
// Qwen2.5-VL, Qwen3-VL and Qwen3.5 checkpoints all name it). Absent keys take the transformers
// class defaults.
#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace sanctum::image {

struct ProcessorConfig {
  int64_t patch_size = 14;
  int64_t temporal_patch_size = 2;
  int64_t merge_size = 2;
  int64_t min_pixels = 56 * 56;         // size.shortest_edge, or the older min_pixels key
  int64_t max_pixels = 28 * 28 * 1280;  // size.longest_edge, or max_pixels
  bool do_resize = true;
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255.0;
  bool do_normalize = true;
  std::array<double, 3> image_mean{0.48145466, 0.4578275, 0.40821073};  // OpenAI CLIP's
  std::array<double, 3> image_std{0.26862954, 0.26130258, 0.27577711};

  int64_t factor() const { return patch_size * merge_size; }
};

// Parses the JSON (errors name the key and the file). Only bicubic resampling (resample = 3, the
// family's default) is implemented; another value is an error saying so.
ProcessorConfig parse_processor_config(const nlohmann::json& j, const std::string& origin = "preprocessor_config.json");
// Reads dir/preprocessor_config.json.
ProcessorConfig load_processor_config(const std::string& dir);

}  // namespace sanctum::image
