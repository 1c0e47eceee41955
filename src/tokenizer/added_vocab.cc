#include "tokenizer/added_vocab.h"

#include <algorithm>

#include "base/utf8.h"
#include "tokenizer/normalizer.h"

namespace sanctum {

void AddedVocab::Trie::insert(std::string_view key, int32_t token) {
  if (key.empty()) return;
  if (nodes.empty()) nodes.emplace_back();
  first_byte[static_cast<uint8_t>(key[0])] = true;
  has_tokens = true;
  int32_t n = 0;
  for (char ch : key) {
    const auto c = static_cast<uint8_t>(ch);
    auto& kids = nodes[n].children;
    auto it = std::lower_bound(kids.begin(), kids.end(), c, [](const auto& p, uint8_t v) { return p.first < v; });
    if (it != kids.end() && it->first == c) {
      n = it->second;
    } else {
      const auto child = static_cast<int32_t>(nodes.size());
      kids.insert(it, {c, child});
      nodes.emplace_back();
      n = child;
    }
  }
  if (nodes[n].token < 0) nodes[n].token = token;  // first declaration wins on duplicates
}

int32_t AddedVocab::Trie::longest(std::string_view text, size_t pos, size_t* end) const {
  int32_t n = 0, found = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto c = static_cast<uint8_t>(text[i]);
    const auto& kids = nodes[n].children;
    auto it = std::lower_bound(kids.begin(), kids.end(), c, [](const auto& p, uint8_t v) { return p.first < v; });
    if (it == kids.end() || it->first != c) break;
    n = it->second;
    if (nodes[n].token >= 0) found = nodes[n].token, *end = i + 1;
  }
  return found;
}

AddedVocab::AddedVocab(std::vector<AddedToken> tokens, const Normalizer* normalizer) : tokens_(std::move(tokens)) {
  for (size_t k = 0; k < tokens_.size(); ++k) {
    const AddedToken& t = tokens_[k];
    if (t.id >= 0) {
      if (static_cast<size_t>(t.id) >= by_id_.size()) by_id_.resize(t.id + 1, -1);
      if (by_id_[t.id] < 0) by_id_[t.id] = static_cast<int32_t>(k);
    }
    if (t.normalized) {
      std::string key = t.content;
      if (normalizer) normalizer->normalize(key);
      tries_[1].insert(key, static_cast<int32_t>(k));
    } else {
      tries_[0].insert(t.content, static_cast<int32_t>(k));
    }
  }
}

const AddedToken* AddedVocab::by_id(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= by_id_.size() || by_id_[id] < 0) return nullptr;
  return &tokens_[by_id_[id]];
}

const AddedToken* AddedVocab::by_content(std::string_view content) const {
  for (const auto& t : tokens_)
    if (t.content == content) return &t;
  return nullptr;
}

namespace {

// Last / first code point of a string (valid UTF-8).
char32_t last_char(std::string_view s, size_t end) {
  size_t b = end - 1;
  while (b > 0 && (static_cast<uint8_t>(s[b]) & 0xC0) == 0x80) --b;
  return utf8::next(s, b);
}

}  // namespace

void AddedVocab::split(std::string_view text, bool normalized_pass, bool parse_special, std::vector<Segment>& out) const {
  const Trie& trie = tries_[normalized_pass ? 1 : 0];
  size_t start_offset = 0;
  if (trie.has_tokens) {
    size_t pos = 0;
    while (pos < text.size()) {
      if (!trie.first_byte[static_cast<uint8_t>(text[pos])]) {
        ++pos;
        continue;
      }
      size_t stop = 0;
      const int32_t k = trie.longest(text, pos, &stop);
      if (k < 0) {
        ++pos;
        continue;
      }
      size_t start = pos;
      pos = stop;
      const AddedToken& t = tokens_[k];
      if (!parse_special && t.special) continue;
      if (t.single_word) {
        const bool start_space = start == 0 || !is_unicode_alphanumeric(last_char(text, start));
        size_t j = stop;
        const bool stop_space = stop == text.size() || !is_unicode_alphanumeric(utf8::next(text, j));
        if (!start_space || !stop_space) continue;
      }
      if (t.lstrip) {
        size_t s = start;
        while (s > 0) {
          size_t b = s - 1;
          while (b > 0 && (static_cast<uint8_t>(text[b]) & 0xC0) == 0x80) --b;
          size_t j = b;
          if (!is_unicode_whitespace(utf8::next(text, j))) break;
          s = b;
        }
        start = std::max(s, start_offset);
      }
      if (t.rstrip) {
        size_t e = stop;
        while (e < text.size()) {
          size_t j = e;
          if (!is_unicode_whitespace(utf8::next(text, j))) break;
          e = j;
        }
        stop = e;
      }
      if (start_offset < start) out.push_back({-1, start_offset, start});
      out.push_back({t.id, start, stop});
      start_offset = stop;
      pos = std::max(pos, stop);
    }
  }
  if (start_offset < text.size()) out.push_back({-1, start_offset, text.size()});
}

}  // namespace sanctum
