// sanctum vision: a VL model's image path for parity tests against reference implementations. Reads
// pixel values as the processor makes them (raw little-endian f32, (patches, C*T*P*P), the images
// one after another) and their grids; writes the vision tower's embeddings, and with a prompt the
// logits of every position and greedy continuations. The k-th image fills the prompt's k-th run of
// image_token_id placeholders (a prompt with none runs as text). --split K prefills the first K tokens (images included) and feeds the
// rest one token at a time, as decode does after an image.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/mapped_file.h"
#include "base/thread_pool.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/device_flags.h"
#include "cli/ids.h"
#include "cli/npy.h"
#include "model/model.h"
#include "ops/precision.h"

namespace sanctum::cli {
namespace {

// "1x4x6,1x8x8" → grids.
std::vector<GridThw> parse_grids(const std::string& text) {
  std::vector<GridThw> grids;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    GridThw g;
    char x1 = 0, x2 = 0;
    long long t = 0, h = 0, w = 0;
    int used = 0;
    check(std::sscanf(item.c_str(), "%lld%c%lld%c%lld%n", &t, &x1, &h, &x2, &w, &used) == 5 && x1 == 'x' && x2 == 'x' &&
              used == static_cast<int>(item.size()),
          ErrorKind::invalid_argument, "--grids: '" + item + "' is not TxHxW (e.g. 1x4x6)");
    g.t = t;
    g.h = h;
    g.w = w;
    grids.push_back(g);
    at = end + 1;
  }
  return grids;
}

int run_vision(int argc, char** argv) {
  Args args(argc, argv,
            {"model", "pixels", "grids", "embeddings-out", "prompt-ids", "out", "split", "greedy", "threads", "matmul-precision",
             "encode-runs", kDeviceFlag, kGpuMemoryLimitFlag, kTuneFlag},
            {"help"});
  if (args.has("help") || !args.has("model") || !args.has("pixels") || !args.has("grids")) {
    std::fputs(
        "usage: sanctum vision --model DIR --pixels FILE.f32 --grids 1x4x6[,TxHxW...] [--embeddings-out FILE.npy]\n"
        "                      [--prompt-ids 1,2,3 [--out FILE.npy] [--split K] [--greedy N]] [--threads N]\n"
        "                      [--matmul-precision f32|int8|bf16] [--device cpu|cuda] [--encode-runs N]\n",
        args.has("help") ? stdout : stderr);
    return args.has("help") ? 0 : 2;
  }
  if (args.has("threads")) set_compute_threads(static_cast<int>(args.get_int("threads", 0)));
  if (args.has("matmul-precision")) ops::set_matmul_precision(ops::parse_matmul_precision(*args.get("matmul-precision")));
  const Device device = apply_device_flags(args);
  auto model = load_model(*args.get("model"), device, tuning_from_flags(args));
  check(model->has_vision(), ErrorKind::invalid_argument, *args.get("model") + ": no vision tower in this checkpoint");

  const std::vector<GridThw> grids = parse_grids(*args.get("grids"));
  const std::string bytes = read_file(*args.get("pixels"));
  int64_t patches = 0;
  for (const GridThw& g : grids) patches += g.patches();
  check(patches > 0 && bytes.size() % (static_cast<size_t>(patches) * sizeof(float)) == 0, ErrorKind::invalid_argument,
        *args.get("pixels") + ": " + std::to_string(bytes.size()) + " bytes do not hold " + std::to_string(patches) + " f32 patch rows");
  const int64_t cols = static_cast<int64_t>(bytes.size() / sizeof(float)) / patches;
  Tensor pixels = Tensor::zeros({patches, cols}, DType::f32);
  std::memcpy(pixels.raw(), bytes.data(), bytes.size());
  // --encode-runs N: the fastest of N encodes (the first pays one-time costs: on a GPU, loading cuBLAS).
  const int64_t runs = args.get_int("encode-runs", 1);
  check(runs >= 1, ErrorKind::invalid_argument, "--encode-runs must be at least 1");
  std::vector<ImageEmbeddings> images;
  double seconds = 0.0;
  for (int64_t r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    images = model->encode_images(pixels, grids);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    seconds = r == 0 ? s : std::min(seconds, s);
  }
  std::fprintf(stderr, "vision tower: %zu images, %lld patches, %.3f s\n", images.size(), static_cast<long long>(patches), seconds);

  const int64_t hidden = model->config().hidden_size;
  if (args.has("embeddings-out")) {
    std::vector<float> all;
    int64_t rows = 0;
    for (const ImageEmbeddings& e : images) {
      all.insert(all.end(), e.rows.data<float>(), e.rows.data<float>() + e.rows.numel());
      rows += e.tokens();
    }
    write_npy(*args.get("embeddings-out"), all, rows, hidden);
  }
  if (!args.has("prompt-ids")) return 0;

  std::vector<int32_t> prompt = parse_ids(*args.get("prompt-ids"));
  const int64_t n = static_cast<int64_t>(prompt.size()), vocab = model->vocab_size();
  const int64_t image_token = model->config().int_or("image_token_id", model->config().int_or("image_token_index", -1));
  std::vector<PromptImage> placed;
  int64_t at = 0;
  const bool text_only = std::find(prompt.begin(), prompt.end(), image_token) == prompt.end();  // the text path through forward_images
  for (const ImageEmbeddings& e : text_only ? std::span<const ImageEmbeddings>() : std::span<const ImageEmbeddings>(images)) {
    while (at < n && prompt[static_cast<size_t>(at)] != image_token) ++at;
    check(at + e.tokens() <= n, ErrorKind::invalid_argument, "--prompt-ids: too few image placeholder tokens for the images");
    placed.push_back({at, &e});
    at += e.tokens();
  }
  const int64_t split = args.get_int("split", n);
  check(split >= 1 && split <= n && (placed.empty() || placed.back().offset + placed.back().image->tokens() <= split),
        ErrorKind::invalid_argument, "--split must be in [1, prompt length] and keep every image in the prefill");
  SequenceState state = model->new_state();
  std::vector<float> out(static_cast<size_t>(n * vocab));
  auto keep = [&](const Tensor& logits, int64_t first_row) {
    for (int64_t r = 0; r < logits.dim(0); ++r)
      std::memcpy(&out[static_cast<size_t>((first_row + r) * vocab)], logits.data<float>() + r * logits.stride(0),
                  static_cast<size_t>(vocab) * sizeof(float));
  };
  keep(model->forward_images(std::span<const int32_t>(prompt).first(static_cast<size_t>(split)), state, LogitsFor::all, placed), 0);
  for (int64_t i = split; i < n; ++i)
    keep(model->forward(std::span<const int32_t>(prompt).subspan(static_cast<size_t>(i), 1), state, LogitsFor::all), i);
  if (args.has("out")) write_npy(*args.get("out"), out, n, vocab);

  if (const int64_t steps = args.get_int("greedy", 0); steps > 0) {
    std::vector<int32_t> generated;
    const float* last = &out[static_cast<size_t>((n - 1) * vocab)];
    int32_t next = static_cast<int32_t>(std::max_element(last, last + vocab) - last);
    for (int64_t s = 0; s < steps; ++s) {
      generated.push_back(next);
      if (s + 1 == steps) break;
      const int32_t fed[1] = {next};
      Tensor logits = model->forward(fed, state, LogitsFor::last);
      const float* row = logits.data<float>();
      next = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
    }
    std::printf("%s\n", format_ids(generated).c_str());
  }
  return 0;
}

SubcommandRegistration reg("vision", "vision tower embeddings, image-prompt logits and greedy tokens (parity testing)", run_vision);

}  // namespace
}  // namespace sanctum::cli
