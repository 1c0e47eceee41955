#include "image/processor_config.h"

#include <fstream>

#include "base/error.h"

namespace sanctum::image {
namespace {

int64_t positive_int(const nlohmann::json& j, const char* key, int64_t fallback, const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_integer() || it->get<int64_t>() <= 0)
    fail(ErrorKind::invalid_input, origin + ": '" + key + "' must be a positive integer");
  return it->get<int64_t>();
}

bool boolean(const nlohmann::json& j, const char* key, bool fallback, const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail(ErrorKind::invalid_input, origin + ": '" + key + "' must be a boolean");
  return it->get<bool>();
}

std::array<double, 3> triple(const nlohmann::json& j, const char* key, std::array<double, 3> fallback, const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (it->is_number()) return {it->get<double>(), it->get<double>(), it->get<double>()};
  if (!it->is_array() || it->size() != 3)
    fail(ErrorKind::invalid_input, origin + ": '" + key + "' must be a number or 3 numbers (R, G, B)");
  std::array<double, 3> out{};
  for (size_t c = 0; c < 3; ++c) {
    if (!(*it)[c].is_number()) fail(ErrorKind::invalid_input, origin + ": '" + key + "' must hold numbers");
    out[c] = (*it)[c].get<double>();
  }
  return out;
}

}  // namespace

ProcessorConfig parse_processor_config(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) fail(ErrorKind::invalid_input, origin + ": must be a JSON object");
  ProcessorConfig c;
  c.patch_size = positive_int(j, "patch_size", c.patch_size, origin);
  c.temporal_patch_size = positive_int(j, "temporal_patch_size", c.temporal_patch_size, origin);
  c.merge_size = positive_int(j, "merge_size", c.merge_size, origin);
  // As the transformers class: size {shortest_edge, longest_edge} (pixel counts, not edges), which
  // min_pixels / max_pixels override.
  if (auto it = j.find("size"); it != j.end() && it->is_object()) {
    c.min_pixels = positive_int(*it, "shortest_edge", c.min_pixels, origin + " size");
    c.max_pixels = positive_int(*it, "longest_edge", c.max_pixels, origin + " size");
  }
  c.min_pixels = positive_int(j, "min_pixels", c.min_pixels, origin);
  c.max_pixels = positive_int(j, "max_pixels", c.max_pixels, origin);
  if (c.min_pixels > c.max_pixels) fail(ErrorKind::invalid_input, origin + ": the minimum pixel count is above the maximum");
  c.do_resize = boolean(j, "do_resize", c.do_resize, origin);
  c.do_rescale = boolean(j, "do_rescale", c.do_rescale, origin);
  c.do_normalize = boolean(j, "do_normalize", c.do_normalize, origin);
  if (auto it = j.find("rescale_factor"); it != j.end() && !it->is_null()) {
    if (!it->is_number()) fail(ErrorKind::invalid_input, origin + ": 'rescale_factor' must be a number");
    c.rescale_factor = it->get<double>();
  }
  c.image_mean = triple(j, "image_mean", c.image_mean, origin);
  c.image_std = triple(j, "image_std", c.image_std, origin);
  for (double s : c.image_std)
    if (s == 0) fail(ErrorKind::invalid_input, origin + ": 'image_std' must not hold 0");
  if (auto it = j.find("resample"); it != j.end() && !it->is_null() && *it != 3)
    fail(ErrorKind::unsupported, origin + ": 'resample' " + it->dump() + " is not supported; only 3 (bicubic) is implemented");
  return c;
}

ProcessorConfig load_processor_config(const std::string& dir) {
  const std::string path = dir + "/preprocessor_config.json";
  std::ifstream in(path);
  if (!in) fail(ErrorKind::not_found, path + ": not found; a vision checkpoint needs its preprocessor_config.json");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) fail(ErrorKind::invalid_input, path + ": not valid JSON");
  return parse_processor_config(j, path);
}

}  // namespace sanctum::image
