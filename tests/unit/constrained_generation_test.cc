// Grammar-constrained generation on a real random-weight model (the qwen3_5 fixture, a hybrid: its
// rejected drafts are replayed, not truncated): every output parses as JSON and follows the schema,
// checked by hand here rather than by the grammar; prompt-lookup drafts change no token; the engine
// keeps one grammar state per sequence when it batches them and forks n > 1 choices; logit_bias
// forces and forbids tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/generator.h"
#include "grammar/compile.h"
#include "model/model.h"
#include "server/server_metrics.h"

namespace sanctum {
namespace {

const std::string kModel = std::string(SANCTUM_TEST_DATA_DIR) + "/hf_fixtures/qwen3_5_text";
constexpr int32_t kVocab = 512;
constexpr int32_t kEos = 511;

// The fixture has no tokenizer: 512 made-up tokens, printable ASCII, JSON pieces that straddle
// structure (`":`, `",`, `"}`), words, a two-byte character split over two tokens, and an end token.
std::vector<std::string> token_texts() {
  std::vector<std::string> t;
  for (char c = 0x20; c < 0x7f; ++c) t.emplace_back(1, c);
  for (const char* s :
       {"\n",     "{\"",   "\":",    "\",", "\"}",   "\": \"", "\", \"",  "true",     "false", "null", "name", "age",  "tags",
        "\"name", "\"age", "\"tags", "red", "green", "blue",   "\"red\"", "12",       "34",    "100",  " \"",  "\n  ", "{}",
        "[]",     "[\"",   "\"]",    "],",  "},",    "ab",     "cd",      "\xc3\xa9", "\xc3",  "\xa9", "\": ", ", ",   "\"]}"})
    t.emplace_back(s);
  for (char a = 'a'; static_cast<int32_t>(t.size()) < kEos && a <= 'z'; ++a)
    for (char b = 'a'; static_cast<int32_t>(t.size()) < kEos && b <= 'z'; ++b) t.push_back(std::string{a, b, 'x'});
  while (static_cast<int32_t>(t.size()) < kEos) t.emplace_back();  // unused ids: never allowed
  t.emplace_back();                                                // kEos
  return t;
}

std::shared_ptr<const grammar::Vocabulary> vocab() {
  static const auto v = std::make_shared<const grammar::Vocabulary>(token_texts(), std::vector<int32_t>{kEos});
  return v;
}

// Longest match first over token_texts (enough to write a prompt).
std::vector<int32_t> encode(const std::string& text) {
  const auto texts = token_texts();
  std::vector<int32_t> ids;
  for (size_t i = 0; i < text.size();) {
    int32_t best = -1;
    for (int32_t id = 0; id < kEos; ++id)
      if (!texts[static_cast<size_t>(id)].empty() &&
          text.compare(i, texts[static_cast<size_t>(id)].size(), texts[static_cast<size_t>(id)]) == 0 &&
          (best < 0 || texts[static_cast<size_t>(id)].size() > texts[static_cast<size_t>(best)].size()))
        best = id;
    EXPECT_GE(best, 0) << text.substr(i);
    ids.push_back(best);
    i += texts[static_cast<size_t>(best)].size();
  }
  return ids;
}

std::string decode(const std::vector<int32_t>& ids) {
  const auto texts = token_texts();
  std::string out;
  for (int32_t id : ids) out += texts[static_cast<size_t>(id)];
  return out;
}

const char* kSchema = R"({"type": "object", "properties": {
  "name": {"type": "string", "maxLength": 8},
  "age": {"type": "integer", "minimum": 0, "maximum": 120},
  "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3}},
  "required": ["name", "age"], "additionalProperties": false})";

std::shared_ptr<const OutputConstraint> schema_constraint() {
  auto c = std::make_shared<OutputConstraint>();
  c->grammar = grammar::compile_json_schema(grammar::SchemaJson::parse(kSchema), vocab());
  return c;
}

size_t utf8_chars(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The schema checked by hand: "" when `text` is a valid instance, else what is wrong.
std::string schema_violation(const std::string& text) {
  const nlohmann::json v = nlohmann::json::parse(text, nullptr, false);
  if (v.is_discarded()) return "not JSON: " + text;
  if (!v.is_object()) return "not an object: " + text;
  if (!v.contains("name") || !v["name"].is_string() || utf8_chars(v["name"].get<std::string>()) > 8) return "bad name: " + text;
  if (!v.contains("age") || !v["age"].is_number_integer() || v["age"].get<int64_t>() < 0 || v["age"].get<int64_t>() > 120)
    return "bad age: " + text;
  for (const auto& [key, value] : v.items()) {
    if (key != "name" && key != "age" && key != "tags") return "extra key " + key + ": " + text;
    if (key != "tags") continue;
    if (!value.is_array() || value.size() > 3) return "bad tags: " + text;
    for (const auto& t : value)
      if (t != "red" && t != "green" && t != "blue") return "bad tag: " + text;
  }
  return "";
}

// The text of a finished constrained output: the end token, if any, is not part of it.
std::string output_text(std::vector<int32_t> tokens) {
  if (!tokens.empty() && tokens.back() == kEos) tokens.pop_back();
  return decode(tokens);
}

std::vector<int32_t> prompt() {
  return encode("Write {\"name\": \"ab\", \"age\": 12, \"tags\": [\"red\"]} again: {\"name\": \"ab\", \"age\": 12}");
}

GenerationParams constrained_params(float temperature, uint64_t seed) {
  GenerationParams p;
  p.max_tokens = 300;
  p.stop_ids = {kEos};
  p.sampling.temperature = temperature;
  p.sampling.seed = seed;
  p.constraint = schema_constraint();
  return p;
}

GenerationResult run(Model& model, const GenerationParams& p) {
  SequenceState state = model.new_state();
  return generate(model, state, prompt(), p);
}

TEST(ConstrainedGeneration, greedy_and_seeded_outputs_follow_the_schema) {
  auto model = load_model(kModel);
  ASSERT_EQ(model->vocab_size(), kVocab);
  for (float temperature : {0.0f, 0.7f, 1.5f})
    for (uint64_t seed = 0; seed < (temperature == 0.0f ? 1u : 4u); ++seed) {
      const GenerationResult r = run(*model, constrained_params(temperature, seed));
      EXPECT_EQ(r.finish, FinishReason::stop) << "temperature " << temperature << " seed " << seed;
      EXPECT_EQ(schema_violation(output_text(r.tokens)), "") << "temperature " << temperature << " seed " << seed;
    }
}

TEST(ConstrainedGeneration, unconstrained_output_of_the_same_model_breaks_the_schema) {
  auto model = load_model(kModel);
  GenerationParams p = constrained_params(0.0f, 0);
  p.constraint = nullptr;
  p.max_tokens = 40;
  EXPECT_NE(schema_violation(output_text(run(*model, p).tokens)), "");  // so the grammar is what makes it valid
}

TEST(ConstrainedGeneration, prompt_lookup_drafts_change_no_token) {
  auto model = load_model(kModel);
  int64_t drafted = 0;
  for (float temperature : {0.0f, 0.9f})
    for (uint64_t seed = 0; seed < 3; ++seed) {
      GenerationParams p = constrained_params(temperature, seed);
      const GenerationResult plain = run(*model, p);
      p.speculate = true;
      p.lookup.always = true;  // draft wherever the context matches: the point is correctness
      const GenerationResult spec = run(*model, p);
      EXPECT_EQ(spec.tokens, plain.tokens) << "temperature " << temperature << " seed " << seed;
      EXPECT_EQ(spec.finish, plain.finish);
      EXPECT_EQ(schema_violation(output_text(spec.tokens)), "");
      drafted += spec.drafted_tokens;
    }
  EXPECT_GT(drafted, 0);
}

TEST(ConstraintState, drafts_are_trimmed_at_the_first_refused_token_and_leave_the_state_as_it_was) {
  ConstraintState s(schema_constraint());
  std::vector<float> before(kVocab, 0.0f), after(kVocab, 0.0f);
  s.accept(encode("{\"")[0]);
  s.apply(before);
  const std::vector<int32_t> draft = encode("name\": \"a");
  std::vector<int32_t> bad = draft;
  bad.push_back(encode("}")[0]);   // `a}`: still a string's text
  bad.push_back(encode("\n")[0]);  // a raw newline never is
  bad.push_back(encode("\"")[0]);
  EXPECT_EQ(s.allowed_prefix(draft), draft.size());
  EXPECT_EQ(s.allowed_prefix(bad), draft.size() + 1);
  const std::vector<int32_t> wrong_key = encode("xyz");
  EXPECT_EQ(s.allowed_prefix(wrong_key), 0u);
  s.apply(after);
  EXPECT_EQ(before, after);
}

TEST(ConstraintState, reasoning_is_free_until_its_end_token_then_the_grammar_holds) {
  auto c = std::make_shared<OutputConstraint>(*schema_constraint());
  const int32_t open = encode("ab")[0], close = encode("cd")[0], brace = encode("{")[0], letter = encode("x")[0];
  c->open_reasoning = open;
  c->close_reasoning = close;
  auto allowed = [](ConstraintState& s, int32_t token) {
    std::vector<float> row(kVocab, 0.0f);
    s.apply(row);
    return row[static_cast<size_t>(token)] == 0.0f;
  };
  ConstraintState opens(c);
  EXPECT_TRUE(allowed(opens, open));  // the first token may open a reasoning block ...
  EXPECT_TRUE(allowed(opens, brace));
  EXPECT_FALSE(allowed(opens, letter));
  opens.accept(open);
  EXPECT_TRUE(allowed(opens, letter));  // ... which is free text
  opens.accept(letter);
  opens.accept(close);
  EXPECT_FALSE(allowed(opens, letter));  // then the grammar starts
  EXPECT_TRUE(allowed(opens, brace));

  ConstraintState answers(c);  // no block: the grammar from the first token, and no block later
  answers.accept(brace);
  EXPECT_FALSE(allowed(answers, open));

  c->open_reasoning = -1;
  c->in_reasoning = true;  // the prompt opened the block
  ConstraintState inside(c);
  EXPECT_TRUE(allowed(inside, letter));
  inside.accept(close);
  EXPECT_FALSE(allowed(inside, letter));
}

TEST(ConstraintState, a_trigger_token_starts_the_grammar) {
  auto c = std::make_shared<OutputConstraint>(*schema_constraint());
  const int32_t tag = encode("ab")[0], letter = encode("x")[0];
  c->trigger = tag;
  ConstraintState s(c);
  std::vector<float> row(kVocab, 0.0f);
  s.apply(row);
  EXPECT_EQ(row[static_cast<size_t>(letter)], 0.0f);
  s.accept(letter);
  s.accept(tag);
  s.apply(row);
  EXPECT_LT(row[static_cast<size_t>(letter)], -1e30f);
}

TEST(LogitBias, plus_100_forces_a_token_and_minus_100_forbids_it) {
  auto model = load_model(kModel);
  GenerationParams p;
  p.max_tokens = 12;
  p.ignore_eos = true;
  const int32_t forced = 77;
  for (float temperature : {0.0f, 1.0f}) {
    p.sampling.temperature = temperature;
    auto c = std::make_shared<OutputConstraint>();
    c->logit_bias = {{forced, 100.0f}};
    p.constraint = c;
    EXPECT_EQ(run(*model, p).tokens, std::vector<int32_t>(12, forced));

    p.constraint = nullptr;
    const std::vector<int32_t> free = run(*model, p).tokens;
    c = std::make_shared<OutputConstraint>();
    for (int32_t t : free) c->logit_bias.emplace_back(t, -100.0f);
    p.constraint = c;
    for (int32_t t : run(*model, p).tokens) EXPECT_EQ(std::count(free.begin(), free.end(), t), 0) << "token " << t;
  }
}

TEST(LogitBias, cannot_push_a_token_past_the_grammar) {
  auto model = load_model(kModel);
  GenerationParams p = constrained_params(0.0f, 0);
  auto c = std::make_shared<OutputConstraint>(*p.constraint);
  c->logit_bias = {{encode("x")[0], 100.0f}, {encode("{")[0], -100.0f}};
  p.constraint = c;
  const GenerationResult r = run(*model, p);
  EXPECT_EQ(schema_violation(output_text(r.tokens)), "");
}

// The fixture behind a model that says it picks on the device: Model's default forward_pick (the
// host reference ops under the pick's masks) stands in for a GPU's. It counts picks and masked rows,
// and checks that each pick's masks are asked for after its forward (when a GPU computes the rows).
class DevicePicking : public Model {
 public:
  explicit DevicePicking(std::unique_ptr<Model> inner) : Model(inner->config()), inner_(std::move(inner)) {}
  SequenceState new_state() const override { return inner_->new_state(); }
  Tensor forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which) override {
    forwarded_ = true;
    return inner_->forward(tokens, state, which);
  }
  std::span<const int32_t> forward_pick(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which,
                                        const TokenPick& pick) override {
    ++picks;
    forwarded_ = false;
    TokenPick checked = pick;
    if (pick.masks)
      checked.masks = [&] {
        EXPECT_TRUE(forwarded_) << "masks asked for before the forward";
        const RowMasks m = pick.masks();
        if (!m.words.empty()) masked_rows += static_cast<int>(m.words.size() / static_cast<size_t>(m.row_words));
        return m;
      };
    return Model::forward_pick(tokens, state, which, checked);
  }
  bool picks_on_device() const override { return true; }
  size_t weight_bytes_per_token() const override { return inner_->weight_bytes_per_token(); }
  int picks = 0, masked_rows = 0;

 private:
  std::unique_ptr<Model> inner_;
  bool forwarded_ = false;
};

TEST(ConstrainedGeneration, device_picks_under_the_grammar_give_the_host_tokens) {
  auto host = load_model(kModel);
  DevicePicking device(load_model(kModel));
  int64_t drafted = 0;
  for (float temperature : {0.0f, 0.8f, 1.5f})
    for (uint64_t seed = 0; seed < (temperature == 0.0f ? 1u : 3u); ++seed)
      for (bool speculate : {false, true}) {
        GenerationParams p = constrained_params(temperature, seed);
        if (seed == 1) p.sampling.top_p = 0.9f;
        if (seed == 2) p.sampling.min_p = 0.05f;
        p.speculate = speculate;
        p.lookup.always = true;
        const GenerationResult want = run(*host, p);
        const int picks = device.picks, masked = device.masked_rows;
        const GenerationResult got = run(device, p);
        const std::string where =
            "temperature " + std::to_string(temperature) + " seed " + std::to_string(seed) + " speculate " + std::to_string(speculate);
        EXPECT_EQ(got.tokens, want.tokens) << where;
        EXPECT_EQ(got.finish, want.finish) << where;
        EXPECT_EQ(schema_violation(output_text(got.tokens)), "") << where;
        EXPECT_GT(device.picks, picks) << where;
        EXPECT_GT(device.masked_rows, masked) << where;
        drafted += got.drafted_tokens;
      }
  EXPECT_GT(drafted, 0);  // verification rows were picked under per-row masks
}

TEST(ConstrainedGeneration, logit_bias_keeps_the_host_path) {
  DevicePicking device(load_model(kModel));
  GenerationParams p = constrained_params(0.0f, 0);
  auto c = std::make_shared<OutputConstraint>(*p.constraint);
  c->logit_bias = {{encode("x")[0], 5.0f}};
  p.constraint = c;
  const GenerationResult r = run(device, p);
  EXPECT_EQ(device.picks, 0);
  EXPECT_EQ(schema_violation(output_text(r.tokens)), "");
}

// A verification's rows: each under the state after the draft tokens before it, as apply() masks a
// row there; free-text rows (reasoning) allow every id; words past the grammar's mask are zero.
TEST(ConstraintState, fill_masks_gives_each_verification_row_the_mask_apply_uses) {
  auto c = std::make_shared<OutputConstraint>(*schema_constraint());
  c->open_reasoning = encode("ab")[0];
  c->close_reasoning = encode("cd")[0];
  const std::vector<int32_t> draft = {encode("ab")[0], encode("x")[0], encode("cd")[0], encode("{\"")[0], encode("name")[0]};
  const size_t row_words = kVocab / 32 + 2;  // a model wider than the grammar's vocabulary
  ConstraintState s(c);
  std::vector<uint32_t> words((draft.size() + 1) * row_words, 0xdeadbeefu);
  ASSERT_TRUE(s.fill_masks(draft, words, row_words));
  for (size_t j = 0; j <= draft.size(); ++j) {
    ConstraintState at(c);
    for (size_t k = 0; k < j; ++k) at.accept(draft[k]);
    std::vector<float> row(kVocab, 0.0f);
    at.apply(row);
    const bool free_text = j == 1 || j == 2;  // inside the reasoning block
    for (int32_t t = 0; t < kVocab; ++t) {
      const bool bit = (words[j * row_words + static_cast<size_t>(t) / 32] >> (t % 32)) & 1u;
      ASSERT_EQ(bit, row[static_cast<size_t>(t)] == 0.0f) << "row " << j << " token " << t;
    }
    for (size_t w = kVocab / 32; w < row_words; ++w) EXPECT_EQ(words[j * row_words + w], free_text ? ~0u : 0u) << "row " << j;
  }
  std::vector<uint32_t> first(row_words);
  ASSERT_TRUE(s.fill_mask(first));  // the state is the one before the draft
  EXPECT_TRUE(std::equal(first.begin(), first.end(), words.begin()));
  s.accept(draft[0]);
  EXPECT_FALSE(s.fill_mask(first));  // reasoning: nothing masked
}

// The engine batches sequences (and forks n > 1 choices from one prefill): each keeps its own grammar state.
class Collector : public GenerationSink {
 public:
  bool on_token(int choice, const TokenOutput& t) override {
    std::lock_guard<std::mutex> lock(mutex);
    tokens[choice].push_back(t.token);
    return true;
  }
  void on_choice_end(int choice, const GenerationResult& r) override {
    std::lock_guard<std::mutex> lock(mutex);
    finishes[choice] = r.finish;
  }
  void on_done(const std::string& error) override { done.set_value(error); }
  std::mutex mutex;
  std::map<int, std::vector<int32_t>> tokens;
  std::map<int, FinishReason> finishes;
  std::promise<std::string> done;
};

TEST(ConstrainedGeneration, batched_sequences_and_forked_choices_each_follow_the_schema) {
  server::ServerMetrics metrics;
  EngineOptions options;
  options.max_seqs = 8;
  Engine engine("qwen3_5", load_model(kModel), options, metrics.engine);
  std::vector<std::shared_ptr<Collector>> sinks;
  std::vector<std::future<std::string>> done;
  std::vector<int> choices;
  for (int j = 0; j < 4; ++j) {
    auto job = std::make_shared<InferenceJob>();
    job->prompt = prompt();
    job->params = constrained_params(j == 0 ? 0.0f : 0.9f, 0);
    job->params.speculate = j % 2 == 1;
    job->params.lookup.always = true;
    job->seed_given = true;
    job->params.sampling.seed = static_cast<uint64_t>(10 * j);
    job->n = j == 3 ? 3 : 1;
    auto sink = std::make_shared<Collector>();
    done.push_back(sink->done.get_future());
    job->sink = sink;
    sinks.push_back(sink);
    choices.push_back(job->n);
    ASSERT_EQ(engine.submit(job), Engine::Admit::accepted);
  }
  for (size_t j = 0; j < sinks.size(); ++j) {
    ASSERT_EQ(done[j].get(), "");
    for (int i = 0; i < choices[j]; ++i) {
      EXPECT_EQ(sinks[j]->finishes[i], FinishReason::stop) << "job " << j << " choice " << i;
      EXPECT_EQ(schema_violation(output_text(sinks[j]->tokens[i])), "") << "job " << j << " choice " << i;
    }
  }
  const Histogram::Snapshot batches = metrics.engine.batch_sequences.snapshot();
  EXPECT_GT(batches.sum, static_cast<double>(batches.cumulative.back()));  // some step ran several sequences
}

}  // namespace
}  // namespace sanctum
