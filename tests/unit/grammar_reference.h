#pragma once
// A scalar reference for grammar masks: the grammar's state as a set of stack tops, advanced one byte
// at a time, and each token of the vocabulary walked through it with no mask cache of any kind. And
// the real vocabulary the mask tests run at.
#include <memory>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/stack_machine.h"
#include "grammar/vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace sanctum::grammar {

// The Qwen3 tokenizer's 151,669 ids (tests/data), built once per test program.
inline std::shared_ptr<const Vocabulary> qwen3_vocab() {
  static const auto vocab = Vocabulary::from_tokenizer(Tokenizer::load(std::string(SANCTUM_TEST_DATA_DIR) + "/tokenizers/qwen3"));
  return vocab;
}

// The grammar's state as a set of stack tops, advanced one byte at a time with no mask of any kind.
class ScalarReference {
 public:
  explicit ScalarReference(const Grammar& grammar) : machine_(grammar) {
    StepFlags flags;
    machine_.start_root(tops_, flags);
    accept_ = flags.accept;
  }

  std::vector<uint32_t> mask(const Vocabulary& vocab) {
    std::vector<uint32_t> mask(vocab.mask_words(), 0);
    for (int32_t id = 0; static_cast<size_t>(id) < vocab.size(); ++id) {
      const bool allowed = vocab.is_eos(id) ? accept_ : !vocab.bytes(id).empty() && walk(vocab.bytes(id), false);
      if (allowed) mask[static_cast<size_t>(id) / 32] |= uint32_t{1} << (id % 32);
    }
    return mask;
  }
  bool accept(const std::string& bytes) { return walk(bytes, true); }

 private:
  // Every byte must leave a live stack, except that the grammar may end on the last one.
  bool walk(const std::string& bytes, bool keep) {
    const size_t mark = machine_.arena_size();
    current_ = tops_;
    bool accept = accept_;
    for (size_t i = 0; i < bytes.size(); ++i) {
      next_.clear();
      StepFlags flags;
      machine_.advance(current_, static_cast<uint8_t>(bytes[i]), next_, flags);
      if (next_.empty() && (!flags.accept || i + 1 < bytes.size())) {
        machine_.truncate(mark);
        return false;
      }
      current_.swap(next_);
      accept = flags.accept;
    }
    if (keep) {
      tops_ = current_;
      accept_ = accept;
    } else {
      machine_.truncate(mark);
    }
    return true;
  }

  StackMachine machine_;
  std::vector<uint32_t> tops_, current_, next_;
  bool accept_ = false;
};

// The tokens where `got` and `want` differ, with their text ("" when the masks are equal).
inline std::string mask_diff(const std::vector<uint32_t>& got, const std::vector<uint32_t>& want, const Vocabulary& vocab) {
  std::string out;
  size_t count = 0;
  for (int32_t id = 0; static_cast<size_t>(id) < vocab.size(); ++id) {
    const bool g = got[static_cast<size_t>(id) / 32] >> (id % 32) & 1, w = want[static_cast<size_t>(id) / 32] >> (id % 32) & 1;
    if (g == w) continue;
    if (++count <= 8) out += std::string(g ? " extra " : " missing ") + std::to_string(id) + " '" + vocab.bytes(id) + "'";
  }
  return count ? std::to_string(count) + " tokens differ:" + out : "";
}

}  // namespace sanctum::grammar
