// Grammar mask cost: for each schema, compile (timed), walk a seeded random path once cold (masks
// computed on first use), then replay the same tokens on a fresh matcher of the same compiled
// grammar and time each fill_mask (warm: the steady state of a served schema), plus applying the
// mask to a logits row. Prints one JSON object with p50 / p99 / max per measure.
//   grammar_bench --tokenizer DIR --schemas DIR [--vocab-size N] [--max-tokens N] [--limit N] [--max-whitespace N] [--dump DIR]
//                 [--state-cache-bytes N] [--mask-bytes N] [--cache-bytes N]
// --max-whitespace N sets the JSON whitespace bound (default 4; 0 for compact output).
// --dump writes the vocabulary (vocab.hex: one token's bytes in hex a line) and, per schema, the
// walked tokens and every 8th step's mask (paths.jsonl) for bench/grammar/peers.py to compare.
// --vocab-size above the tokenizer's pads the vocabulary with extra tokens made by joining two
// existing ones (a larger BPE vocabulary of the same kind), to time masks at that width.
// --state-cache-bytes sets each grammar's whole-state mask budget (0: off, so every warm step
// combines the cached context masks: the cost of a state not seen before); --mask-bytes the bound on
// everything a grammar holds in masks (MaskBudget), of which the state cache is part.
// The compiled grammars go through one CompiledGrammarCache, as the server keeps them, bounded by
// --cache-bytes (default: the server's): the output has its largest total right after a lookup
// (held to the bound) and after a schema's walks (the bound plus what that grammar computed).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/compile.h"
#include "grammar/grammar_cache.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using namespace sanctum::grammar;
using Clock = std::chrono::steady_clock;

namespace {

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

nlohmann::json summary(std::vector<double> v) {
  if (v.empty()) return nullptr;
  std::sort(v.begin(), v.end());
  auto q = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))]; };
  double sum = 0;
  for (double x : v) sum += x;
  return {{"n", v.size()},  {"p50", q(0.5)},   {"p90", q(0.9)},
          {"p99", q(0.99)}, {"max", v.back()}, {"mean", sum / static_cast<double>(v.size())}};
}

std::shared_ptr<const Vocabulary> padded_vocab(const sanctum::Tokenizer& tok, size_t size) {
  auto base = Vocabulary::from_tokenizer(tok);
  if (size <= base->size()) return base;
  std::vector<std::string> bytes(size);
  for (size_t id = 0; id < base->size(); ++id) bytes[id] = base->bytes(static_cast<int32_t>(id));
  std::vector<int32_t> ordinary;
  for (size_t id = 0; id < base->size(); ++id)
    if (!bytes[id].empty()) ordinary.push_back(static_cast<int32_t>(id));
  std::mt19937 rng(7);
  for (size_t id = base->size(); id < size; ++id)
    bytes[id] =
        bytes[static_cast<size_t>(ordinary[rng() % ordinary.size()])] + bytes[static_cast<size_t>(ordinary[rng() % ordinary.size()])];
  return std::make_shared<const Vocabulary>(std::move(bytes), base->eos_ids());
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_dir, schemas_dir, dump_dir;
  JsonGrammarOptions options;
  size_t vocab_size = 0, max_tokens = 400, limit = 1'000'000;
  size_t cache_bytes = CompiledGrammarCache::kDefaultBytes;
  MaskBudget budget;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--tokenizer") tokenizer_dir = v;
    else if (a == "--schemas") schemas_dir = v;
    else if (a == "--vocab-size") vocab_size = std::stoul(v);
    else if (a == "--max-tokens") max_tokens = std::stoul(v);
    else if (a == "--limit") limit = std::stoul(v);
    else if (a == "--dump") dump_dir = v;
    else if (a == "--max-whitespace") options.max_whitespace = std::stoi(v);
    else if (a == "--state-cache-bytes") budget.state_bytes = std::stoul(v);
    else if (a == "--mask-bytes") budget.bytes = std::stoul(v);
    else if (a == "--cache-bytes") cache_bytes = std::stoul(v);
  }
  if (tokenizer_dir.empty() || schemas_dir.empty()) {
    std::cerr << "usage: grammar_bench --tokenizer DIR --schemas DIR [--vocab-size N] [--max-tokens N] [--limit N]\n";
    return 2;
  }
  const auto tok = sanctum::Tokenizer::load(tokenizer_dir);
  const auto vocab = padded_vocab(tok, vocab_size);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(schemas_dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.size() > limit) files.resize(limit);

  std::ofstream paths;
  if (!dump_dir.empty()) {
    fs::create_directories(dump_dir);
    std::ofstream hex(dump_dir + "/vocab.hex");
    for (size_t id = 0; id < vocab->size(); ++id) {
      static const char* digits = "0123456789abcdef";
      for (unsigned char c : vocab->bytes(static_cast<int32_t>(id))) hex << digits[c >> 4] << digits[c & 15];
      hex << "\n";
    }
    std::ofstream(dump_dir + "/meta.json") << nlohmann::json{{"eos_ids", vocab->eos_ids()}}.dump();
    paths.open(dump_dir + "/paths.jsonl");
  }
  std::vector<double> compile_us, cold_us, warm_us, apply_us, context_bytes, profile_bytes, state_bytes, grammar_bytes;
  size_t compiled_count = 0, unsupported = 0, masks = 0, state_hits = 0, state_misses = 0, evicted = 0;
  size_t cache_peak_lookup = 0, cache_peak_walk = 0;
  CompiledGrammarCache cache(cache_bytes);
  std::vector<std::pair<size_t, std::string>> cold_begin;  // (first index into cold_us, schema) per schema
  std::vector<uint32_t> mask(vocab->mask_words());
  std::vector<float> logits(vocab->size(), 0.5f);
  for (const auto& file : files) {
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    const auto schema = nlohmann::ordered_json::parse(ss.str());
    auto t0 = Clock::now();
    std::optional<CompiledGrammar> got;
    try {
      got = cache.get(file.string(), [&] {
        t0 = Clock::now();
        CompiledGrammar g(json_schema_grammar(schema, options), vocab, budget);
        compile_us.push_back(us_since(t0));
        return g;
      });
    } catch (const GrammarError&) {
      ++unsupported;
      continue;
    }
    const CompiledGrammar compiled = *got;
    cache_peak_lookup = std::max(cache_peak_lookup, cache.stats().bytes);
    ++compiled_count;
    // Cold walk: picks tokens and fills the mask caches.
    cold_begin.push_back({cold_us.size(), file.filename().string()});
    std::vector<int32_t> path;
    {
      GrammarMatcher m(compiled);
      std::mt19937 rng(1);
      std::vector<int32_t> allowed;
      while (path.size() < max_tokens && !m.is_terminated()) {
        t0 = Clock::now();
        m.fill_mask(mask);
        cold_us.push_back(us_since(t0));
        allowed.clear();
        for (size_t w = 0; w < mask.size(); ++w)
          for (uint32_t bits = mask[w]; bits; bits &= bits - 1)
            allowed.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(__builtin_ctz(bits))));
        if (allowed.empty()) break;
        const int32_t t = allowed[rng() % allowed.size()];
        m.accept(t);
        path.push_back(t);
      }
    }
    // Warm replay: the served steady state.
    GrammarMatcher m(compiled);
    nlohmann::json samples = nlohmann::json::object();
    for (size_t step = 0; step < path.size(); ++step) {
      const int32_t t = path[step];
      t0 = Clock::now();
      m.fill_mask(mask);
      warm_us.push_back(us_since(t0));
      if (paths.is_open() && step % 8 == 0) samples[std::to_string(step)] = mask;
      t0 = Clock::now();
      for (size_t id = 0; id < logits.size(); ++id)
        if (!(mask[id / 32] >> (id % 32) & 1)) logits[id] = -INFINITY;
      apply_us.push_back(us_since(t0));
      m.accept(t);
    }
    const CompileStats stats = compiled.stats();
    masks += stats.masks_computed;
    state_hits += stats.state_hits;
    state_misses += stats.state_misses;
    context_bytes.push_back(static_cast<double>(stats.mask_bytes));
    profile_bytes.push_back(static_cast<double>(stats.repeat_profile_bytes));
    state_bytes.push_back(static_cast<double>(stats.state_mask_bytes));
    grammar_bytes.push_back(static_cast<double>(stats.memory_bytes));
    evicted += stats.evicted;
    cache_peak_walk = std::max(cache_peak_walk, cache.stats().bytes);
    if (paths.is_open()) paths << nlohmann::json{{"file", file.filename().string()}, {"path", path}, {"masks", samples}}.dump() << "\n";
  }
  std::vector<size_t> order(cold_us.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const size_t shown = std::min<size_t>(5, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shown), order.end(),
                    [&](size_t a, size_t b) { return cold_us[a] > cold_us[b]; });
  nlohmann::json slowest_json = nlohmann::json::array();
  for (size_t k = 0; k < shown; ++k) {
    const size_t i = order[k];
    auto it = std::upper_bound(cold_begin.begin(), cold_begin.end(), i, [](size_t x, const auto& b) { return x < b.first; }) - 1;
    slowest_json.push_back({{"us", cold_us[i]}, {"schema", it->second}, {"step", i - it->first}});
  }
  const nlohmann::json out = {{"vocab_size", vocab->size()},
                              {"schemas", files.size()},
                              {"compiled", compiled_count},
                              {"unsupported", unsupported},
                              {"masks_computed", masks},
                              {"state_hits", state_hits},
                              {"state_misses", state_misses},
                              {"compile_us", summary(compile_us)},
                              {"mask_cold_us", summary(cold_us)},
                              {"mask_warm_us", summary(warm_us)},
                              {"apply_us", summary(apply_us)},
                              {"context_mask_bytes_per_grammar", summary(context_bytes)},
                              {"repeat_profile_bytes_per_grammar", summary(profile_bytes)},
                              {"state_mask_bytes_per_grammar", summary(state_bytes)},
                              {"memory_bytes_per_grammar", summary(grammar_bytes)},
                              {"mask_budget_bytes", budget.bytes},
                              {"masks_evicted", evicted},
                              {"grammar_cache",
                               {{"budget_bytes", cache.budget_bytes()},
                                {"peak_bytes_after_lookup", cache_peak_lookup},
                                {"peak_bytes_after_walk", cache_peak_walk},
                                {"grammars", cache.stats().grammars},
                                {"evicted", cache.stats().evicted}}},
                              {"slowest_cold_steps", slowest_json}};
  std::cout << out.dump(2) << "\n";
  return 0;
}
