// Random walks under a JSON Schema: for each schema file, compile it against a tokenizer's
// vocabulary, then repeatedly take the mask, pick a random allowed token (seeded) and accept it
// until the end token is taken. Writes one JSON line per schema (the output text, or the
// unsupported feature); tests/grammar/test_json_schema_walk.py validates the outputs.
//   grammar_walk --tokenizer DIR --schemas DIR --out FILE [--seed N] [--max-tokens N] [--tries N] [--threads N]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/compile.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using namespace sanctum::grammar;

namespace {

struct Walk {
  bool complete = false;
  std::string text;
  size_t tokens = 0;
};

Walk random_walk(const CompiledGrammar& compiled, uint32_t seed, size_t max_tokens) {
  const Vocabulary& vocab = compiled.vocab();
  GrammarMatcher m(compiled);
  std::mt19937 rng(seed);
  std::vector<uint32_t> mask(vocab.mask_words());
  std::vector<int32_t> allowed;
  Walk w;
  for (; w.tokens < max_tokens; ++w.tokens) {
    m.fill_mask(mask);
    allowed.clear();
    for (size_t word = 0; word < mask.size(); ++word)
      for (uint32_t bits = mask[word]; bits; bits &= bits - 1)
        allowed.push_back(static_cast<int32_t>(word * 32 + static_cast<size_t>(__builtin_ctz(bits))));
    if (allowed.empty()) throw std::runtime_error("the mask allows no token before the grammar is complete");
    const int32_t token = allowed[rng() % allowed.size()];
    if (!m.accept(token)) throw std::runtime_error("a token from the mask was refused: " + std::to_string(token));
    if (m.is_terminated()) {
      w.complete = true;
      return w;
    }
    w.text += vocab.bytes(token);
  }
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_dir, schemas_dir, out_path;
  uint32_t seed = 1;
  size_t max_tokens = 2000, tries = 4, threads = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--tokenizer") tokenizer_dir = v;
    else if (a == "--schemas") schemas_dir = v;
    else if (a == "--out") out_path = v;
    else if (a == "--seed") seed = static_cast<uint32_t>(std::stoul(v));
    else if (a == "--max-tokens") max_tokens = std::stoul(v);
    else if (a == "--tries") tries = std::stoul(v);
    else if (a == "--threads") threads = std::max<size_t>(1, std::stoul(v));
    else {
      std::cerr << "grammar_walk: unknown flag " << a << "\n";
      return 2;
    }
  }
  if (tokenizer_dir.empty() || schemas_dir.empty() || out_path.empty()) {
    std::cerr << "usage: grammar_walk --tokenizer DIR --schemas DIR --out FILE [--seed N] [--max-tokens N]\n";
    return 2;
  }
  const auto tokenizer = sanctum::Tokenizer::load(tokenizer_dir);
  const auto vocab = Vocabulary::from_tokenizer(tokenizer);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(schemas_dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<std::string> rows(files.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < files.size();) {
      const fs::path& file = files[i];
      nlohmann::json row = {{"file", file.filename().string()}};
      const auto t0 = std::chrono::steady_clock::now();
      try {
        std::ifstream in(file);
        std::stringstream ss;
        ss << in.rdbuf();
        const auto compiled = compile_json_schema(nlohmann::ordered_json::parse(ss.str()), vocab);
        row["status"] = "unfinished";
        for (size_t t = 0; t < tries; ++t) {
          const Walk w = random_walk(compiled, seed + static_cast<uint32_t>(t), max_tokens);
          if (!w.complete) continue;
          row["status"] = "ok";
          row["output"] = w.text;
          row["tokens"] = w.tokens;
          row["try"] = t;
          break;
        }
        const auto s = compiled.stats();
        row["positions"] = s.terminals;
        row["masks_computed"] = s.masks_computed;
      } catch (const GrammarError& e) {
        row["status"] = "unsupported";
        row["feature"] = e.feature();
        row["error"] = e.what();
      } catch (const std::exception& e) {
        row["status"] = "error";
        row["error"] = e.what();
      }
      row["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      rows[i] = row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  std::ofstream out(out_path);
  for (const auto& r : rows) out << r << "\n";
  return 0;
}
