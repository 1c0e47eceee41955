// Runs sanctum's image path on files, for the parity tests (tests/image/test_*.py) and the bench
// (bench/image_preprocess.py). It lives beside the server binary (build/image_prepare).
//   image_prepare --config preprocessor_config.json [--threads N] [--repeat N] [--out PREFIX]
//                 [--max-image-pixels N] [--max-image-bytes N] [--fetch-timeout-ms N] IMAGE
// IMAGE is a file, or an http(s) URL fetched as --allow-image-urls fetches it (a failed fetch prints
// {"error", "kind": "fetch", "code"}).
// Prints one JSON object: the decoded size, grid_thw, rows, cols, token count, content hash, and each
// of the --repeat runs' seconds (decode and preprocess, and decode alone); with --out also writes PREFIX.rgb (decoded RGB) and PREFIX.f32
// (pixel_values). A decode or limit error prints {"error", "kind"} and exits 2.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/thread_pool.h"
#include "image/decode.h"
#include "image/preprocess.h"
#include "server/api_error.h"
#include "server/image_fetch.h"

using namespace sanctum;

int main(int argc, char** argv) {
  std::string config_path, out_prefix, image_path;
  int threads = 1, repeat = 1;
  std::chrono::milliseconds fetch_timeout{10000};
  image::DecodeLimits limits;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--config") config_path = next();
    else if (a == "--out") out_prefix = next();
    else if (a == "--threads") threads = std::stoi(next());
    else if (a == "--repeat") repeat = std::stoi(next());
    else if (a == "--max-image-pixels") limits.max_pixels = std::stoll(next());
    else if (a == "--max-image-bytes") limits.max_encoded_bytes = std::stoull(next());
    else if (a == "--fetch-timeout-ms") fetch_timeout = std::chrono::milliseconds(std::stoll(next()));
    else image_path = a;
  }
  if (config_path.empty() || image_path.empty()) {
    std::cerr << "usage: image_prepare --config preprocessor_config.json [--threads N] [--repeat N] [--out PREFIX] IMAGE\n";
    return 1;
  }
  std::ifstream cf(config_path);
  const image::ProcessorConfig config = image::parse_processor_config(nlohmann::json::parse(cf), config_path);
  std::string bytes;
  if (image_path.rfind("http://", 0) == 0 || image_path.rfind("https://", 0) == 0) {
    try {
      bytes = server::fetch_image_url(image_path, server::FetchLimits{limits.max_encoded_bytes, fetch_timeout}, "image");
    } catch (const server::ApiError& e) {
      std::cout << nlohmann::json{{"error", e.what()}, {"kind", "fetch"}, {"code", e.code()}} << "\n";
      return 2;
    }
  } else {
    std::ifstream in(image_path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::unique_ptr<ThreadPool> pool = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;

  image::RgbImage rgb;
  image::PreparedImage prepared;
  std::vector<double> runs, decode_runs;
  try {
    for (int r = 0; r < repeat; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      rgb = image::decode_image(bytes, limits);
      decode_runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      prepared = image::prepare_image(rgb, config, pool.get());
      runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  } catch (const Error& e) {
    std::cout << nlohmann::json{{"error", e.what()}, {"kind", e.kind() == ErrorKind::invalid_argument ? "limit" : "invalid"}} << "\n";
    return 2;
  }
  if (!out_prefix.empty()) {
    std::ofstream(out_prefix + ".rgb", std::ios::binary).write(reinterpret_cast<const char*>(rgb.pixels.data()), rgb.pixels.size());
    std::ofstream(out_prefix + ".f32", std::ios::binary)
        .write(reinterpret_cast<const char*>(prepared.pixel_values.data()), prepared.pixel_values.size() * sizeof(float));
  }
  std::string hash;
  for (uint8_t b : prepared.content_hash) {
    char h[3];
    std::snprintf(h, sizeof h, "%02x", b);
    hash += h;
  }
  std::cout << nlohmann::json{{"width", rgb.width},    {"height", rgb.height},  {"grid_thw", prepared.grid_thw},
                              {"rows", prepared.rows}, {"cols", prepared.cols}, {"tokens", prepared.token_count()},
                              {"hash", hash},          {"seconds", runs},       {"decode_seconds", decode_runs}}
            << "\n";
  return 0;
}
