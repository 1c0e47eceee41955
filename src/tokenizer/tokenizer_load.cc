// Tokenizer construction from tokenizer.json / tokenizer_config.json / generation_config.json.
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/decoder.h"
#include "tokenizer/file_io.h"
#include "tokenizer/loader.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace sanctum {

using json = nlohmann::json;

namespace {

json parse_json(std::string_view text, const char* what) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail(ErrorKind::invalid_input, std::string(what) + ": malformed JSON (" + e.what() + ")");
  }
}

// A token field may be a plain string or an AddedToken object {"content": ...}.
std::string token_string(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return {};
}

std::vector<int32_t> special_ids(const json& specials, const std::string& name) {
  std::vector<int32_t> ids;
  if (specials.is_object() && specials.contains(name)) {
    for (const auto& id : specials[name].at("ids")) ids.push_back(id.get<int32_t>());
  } else {
    fail(ErrorKind::invalid_input, "tokenizer.json: post_processor names special token '" + name + "' without ids");
  }
  return ids;
}

}  // namespace

void TokenizerLoader::post_processor(Tokenizer& t, const json& spec, const json& root) {
  if (spec.is_null()) return;
  const std::string type = spec.at("type").get<std::string>();
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    for (const json& p : spec.at("processors")) post_processor(t, p, root);
    return;
  }
  if (type == "TemplateProcessing") {
    bool after = false;
    for (const json& piece : spec.at("single")) {
      if (piece.contains("Sequence")) {
        after = true;
      } else if (piece.contains("SpecialToken")) {
        const auto ids = special_ids(spec.value("special_tokens", json::object()), piece["SpecialToken"].at("id").get<std::string>());
        auto& target = after ? t.suffix_ids_ : t.prefix_ids_;
        target.insert(target.end(), ids.begin(), ids.end());
      }
    }
    return;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    t.prefix_ids_.push_back(spec.at("cls").at(1).get<int32_t>());
    t.suffix_ids_.push_back(spec.at("sep").at(1).get<int32_t>());
    return;
  }
  fail(ErrorKind::unsupported, "tokenizer.json: post_processor type '" + type + "' is not supported");
}

void TokenizerLoader::build(Tokenizer& t, const json& root) {
  const json& model = root.at("model");
  const std::string type = model.value("type", "BPE");
  if (type != "BPE") fail(ErrorKind::unsupported, "tokenizer.json: model type '" + type + "' is not supported (BPE only)");
  if (!model.contains("vocab") || !model["vocab"].is_object()) fail(ErrorKind::invalid_input, "tokenizer.json: model.vocab missing");
  auto nonempty = [&](const char* key) { return model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty(); };
  if (nonempty("continuing_subword_prefix") || nonempty("end_of_word_suffix"))
    fail(ErrorKind::unsupported, "tokenizer.json: BPE continuing_subword_prefix / end_of_word_suffix are not supported");

  Bpe::Options options;
  options.byte_fallback = model.value("byte_fallback", false);
  options.fuse_unk = model.value("fuse_unk", false);
  options.ignore_merges = model.value("ignore_merges", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) options.unk_token = model["unk_token"].get<std::string>();

  std::vector<std::pair<std::string, int32_t>> vocab;
  vocab.reserve(model["vocab"].size());
  int32_t max_id = -1;
  for (const auto& [token, id] : model["vocab"].items()) {
    const int32_t v = id.get<int32_t>();
    if (v < 0) fail(ErrorKind::invalid_input, "tokenizer.json: negative id for token '" + token + "'");
    vocab.emplace_back(token, v);
    max_id = std::max(max_id, v);
  }
  std::vector<std::pair<std::string, std::string>> merges;
  if (model.contains("merges")) {
    for (const json& m : model["merges"]) {
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          fail(ErrorKind::invalid_input, "tokenizer.json: merge '" + s + "' is not two tokens separated by one space");
        merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else {
        merges.emplace_back(m.at(0).get<std::string>(), m.at(1).get<std::string>());
      }
    }
  }
  t.id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [token, id] : vocab) t.id_to_token_[id] = token;

  // Byte-level models run on raw bytes: decode the vocabulary from its alphabet once, here.
  const json pre = root.value("pre_tokenizer", json());
  bool raw = ends_with_byte_level(pre) && !options.byte_fallback;
  std::vector<std::pair<std::string, int32_t>> raw_vocab;
  std::vector<std::pair<std::string, std::string>> raw_merges;
  if (raw) {
    for (const auto& [token, id] : vocab) {
      std::string bytes;
      if (byte_level::decode(token, bytes)) raw_vocab.emplace_back(std::move(bytes), id);
    }
    for (const auto& [a, b] : merges) {
      std::string x, y;
      if (!byte_level::decode(a, x) || !byte_level::decode(b, y)) {
        raw = false;
        break;
      }
      raw_merges.emplace_back(std::move(x), std::move(y));
    }
  }
  options.raw_bytes = raw;
  if (raw && !options.unk_token.empty()) {
    std::string bytes;
    if (byte_level::decode(options.unk_token, bytes)) options.unk_token = bytes;
  }
  t.raw_bytes_ = raw;
  t.model_ = raw ? std::make_unique<Bpe>(raw_vocab, raw_merges, options) : std::make_unique<Bpe>(vocab, merges, options);

  t.normalizer_ = make_normalizer(root.value("normalizer", json()));
  PreTokenizerOptions pre_options;
  pre_options.raw_bytes = raw;
  t.pre_tokenizer_ = make_pre_tokenizer(pre, pre_options);
  t.decoder_ = make_decoder(root.value("decoder", json()));

  std::vector<AddedToken> added;
  for (const json& a : root.value("added_tokens", json::array())) {
    AddedToken tok;
    tok.content = a.at("content").get<std::string>();
    tok.id = a.at("id").get<int32_t>();
    tok.special = a.value("special", false);
    tok.lstrip = a.value("lstrip", false);
    tok.rstrip = a.value("rstrip", false);
    tok.single_word = a.value("single_word", false);
    tok.normalized = a.value("normalized", !tok.special);
    if (tok.id < 0) fail(ErrorKind::invalid_input, "tokenizer.json: added token '" + tok.content + "' has a negative id");
    added.push_back(std::move(tok));
  }
  t.added_ = AddedVocab(std::move(added), t.normalizer_.get());
  post_processor(t, root.value("post_processor", json()), root);
}

void TokenizerLoader::set_from_tekken(Tokenizer& t, std::unique_ptr<Bpe> model, std::vector<std::string> id_to_token,
                                      std::vector<AddedToken> specials, const std::string& pattern) {
  t.model_ = std::move(model);
  t.raw_bytes_ = true;
  t.id_to_token_ = std::move(id_to_token);
  PreTokenizerOptions options;
  options.raw_bytes = true;
  json pre = {{"type", "Sequence"},
              {"pretokenizers",
               json::array({{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
                            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  t.pre_tokenizer_ = make_pre_tokenizer(pre, options);
  t.decoder_ = make_decoder(json{{"type", "ByteLevel"}});
  t.added_ = AddedVocab(std::move(specials), nullptr);
  const int32_t bos = t.token_to_id("<s>");
  if (bos >= 0) t.prefix_ids_ = {bos};
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json) {
  Tokenizer t;
  const json root = parse_json(tokenizer_json, "tokenizer.json");
  try {
    if (!root.is_object()) fail(ErrorKind::invalid_input, "tokenizer.json: top level is not an object");
    TokenizerLoader::build(t, root);
  } catch (const json::exception& e) {
    fail(ErrorKind::invalid_input, std::string("tokenizer.json: unexpected structure (") + e.what() + ")");
  }
  t.finish_config(config_json);
  return t;
}

void Tokenizer::finish_config(std::string_view config_json) {
  json config = json::object();
  if (!config_json.empty()) config = parse_json(config_json, "tokenizer_config.json");
  if (!config.is_object()) fail(ErrorKind::invalid_input, "tokenizer_config.json: top level is not an object");
  bos_token_ = token_string(config.value("bos_token", json()));
  eos_token_ = token_string(config.value("eos_token", json()));
  if (!bos_token_.empty()) bos_id_ = token_to_id(bos_token_);
  if (!eos_token_.empty()) eos_id_ = token_to_id(eos_token_);
  if (eos_id_ >= 0) eos_ids_.push_back(eos_id_);
  const bool prefix_has_bos = bos_id_ >= 0 && !prefix_ids_.empty() && prefix_ids_.front() == bos_id_;
  add_bos_ =
      config.contains("add_bos_token") && config["add_bos_token"].is_boolean() ? config["add_bos_token"].get<bool>() : prefix_has_bos;
  const json tmpl = config.value("chat_template", json());
  if (tmpl.is_string()) {
    chat_template_ = tmpl.get<std::string>();
  } else if (tmpl.is_array()) {
    for (const json& entry : tmpl)
      if (entry.is_object() && entry.value("name", "") == "default") chat_template_ = entry.value("template", "");
  }
}

Tokenizer Tokenizer::load(const std::string& dir) {
  const std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  const std::string config_path = base + "tokenizer_config.json";
  const std::string config = file_exists(config_path) ? read_maybe_gzip(config_path) : std::string();
  Tokenizer t;
  if (file_exists(base + "tokenizer.json")) {
    t = from_json(read_maybe_gzip(base + "tokenizer.json"), config);
  } else if (file_exists(base + "tokenizer.json.gz")) {
    t = from_json(read_maybe_gzip(base + "tokenizer.json.gz"), config);
  } else if (file_exists(base + "tekken.json") || file_exists(base + "tekken.json.gz")) {
    t = from_tekken(read_maybe_gzip(base + (file_exists(base + "tekken.json") ? "tekken.json" : "tekken.json.gz")));
    if (!config.empty()) t.finish_config(config);
  } else {
    fail(ErrorKind::not_found, dir + ": no tokenizer.json, tokenizer.json.gz or tekken.json");
  }
  if (file_exists(base + "chat_template.jinja")) t.chat_template_ = read_maybe_gzip(base + "chat_template.jinja");
  const std::string gen_path = base + "generation_config.json";
  if (file_exists(gen_path)) {
    const json gen = parse_json(read_maybe_gzip(gen_path), "generation_config.json");
    const json eos = gen.is_object() ? gen.value("eos_token_id", json()) : json();
    auto add = [&](const json& v) {
      if (v.is_number_integer()) {
        const auto id = v.get<int32_t>();
        if (std::find(t.eos_ids_.begin(), t.eos_ids_.end(), id) == t.eos_ids_.end()) t.eos_ids_.push_back(id);
      }
    };
    if (eos.is_array())
      for (const json& v : eos) add(v);
    else add(eos);
  }
  return t;
}

}  // namespace sanctum
