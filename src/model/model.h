#pragma once
// The interface every architecture implements. A Model owns its weights (views into the mapped
// checkpoint) and per-call scratch; one engine thread drives it at a time.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/pinned_file.h"
#include "model/config.h"
#include "model/state.h"
#include "model/vision/image_input.h"
#include "ops/sampling.h"
#include "tensor/tensor.h"

namespace sanctum {

class LoraAdapter;
struct ServedLora;

enum class LogitsFor { last, all, none };

// One sequence's part of a batched forward: its tokens (positions state->length() ..) and the logits
// rows it wants back.
struct BatchEntry {
  std::span<const int32_t> tokens;
  SequenceState* state = nullptr;
  LogitsFor which = LogitsFor::last;
};

// The tokens each logits row may pick (a grammar's masks): `row_words` u32 words per row, the rows
// one after another; bit t % 32 of a row's word t / 32 set: token t allowed (ids past the row's words
// never). No words: no row is masked.
struct RowMasks {
  std::span<const uint32_t> words;
  int64_t row_words = 0;
};

// How forward_pick chooses the token of each logits row. No penalties and nothing that needs the
// raw row (logprobs): callers that need those sample on the host from forward()'s logits.
struct TokenPick {
  bool greedy = true;                // argmax, exactly sanctum::argmax
  ops::RowSampling sampling;         // when not greedy
  std::span<const double> uniforms;  // when not greedy: one per row, from Sampler::uniform()
  // Constrained output (empty: none): called once per forward_pick or queue_pick, after the forward
  // is queued and before any row is picked, so that on a GPU the host works out the masks while the
  // rows are computed. Each row is then picked as if the logits its mask leaves out were -inf
  // (ops::ref::mask_row). The words must stay valid until the call that asked for them returns.
  std::function<RowMasks()> masks;
};

class Model {
 public:
  virtual ~Model() = default;
  const ModelConfig& config() const { return config_; }
  int64_t vocab_size() const { return config_.vocab_size; }

  // A vision-language checkpoint whose vision tower loaded: encode_images and forward_images work.
  bool has_vision() const { return config_.has_vision; }

  // Runs the vision tower over pixel_values (sum of patches, C * temporal_patch * patch * patch) f32
  // on the host, the images' rows one after another in the processor's layout, one grid each; returns
  // each image's embeddings. Throws unsupported for a model without a tower.
  virtual std::vector<ImageEmbeddings> encode_images(const Tensor& pixel_values, std::span<const GridThw> grids) {
    (void)pixel_values;
    (void)grids;
    fail(ErrorKind::unsupported, config_.dir + ": this model has no vision tower; load a vision-language checkpoint for image input");
  }

  // forward() with images: each image's placeholder tokens take its rows in place of their token
  // embeddings, and positions follow the multimodal RoPE (an image's tokens at its (t, h, w) grid
  // offset by the text before it, text after it continuing past the grid's largest extent; the state
  // carries the offset on to later forwards). With no images and no image earlier in the sequence
  // this is forward(), bit for bit.
  virtual Tensor forward_images(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which,
                                std::span<const PromptImage> images) {
    check(images.empty() && state.rope_delta() == 0, ErrorKind::unsupported,
          config_.dir + ": this model takes no images; load a vision-language checkpoint for image input");
    return forward(tokens, state, which);
  }

  // A fresh, empty state for one sequence.
  virtual SequenceState new_state() const = 0;

  // Runs `tokens` (positions state.length() ..) through the model, extends the state, and returns
  // logits (rows, vocab) f32 for the last token, for every token, or none (rows = 0). The returned
  // tensor is scratch owned by the model, valid until the next forward.
  virtual Tensor forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which) = 0;

  // Several sequences (each state at most once) in one forward: what forward() does for each entry,
  // with the rows of all of them going through the projections together, so that each weight is read
  // once per step rather than once per sequence. Returns the entries' logits rows one after another
  // (last: 1, all: its token count, none: 0), on the host, each bit for bit the row forward() gives
  // for that entry alone (the ops keep rows independent of the batch). Valid until the next forward.
  // This default runs the entries one by one.
  virtual Tensor forward_batch(std::span<const BatchEntry> batch) {
    int64_t rows = 0;
    for (const BatchEntry& e : batch) rows += row_count(e);
    Tensor out = rows > 0 ? Tensor::zeros({rows, config_.vocab_size}, DType::f32) : Tensor{};
    int64_t at = 0;
    for (const BatchEntry& e : batch) {
      Tensor logits = forward(e.tokens, *e.state, e.which);
      if (row_count(e) == 0) continue;
      out.slice(0, at, at + logits.dim(0)).copy_from(logits);
      at += logits.dim(0);
    }
    return out;
  }
  static int64_t row_count(const BatchEntry& e) {
    return e.which == LogitsFor::none ? 0 : e.which == LogitsFor::last ? 1 : static_cast<int64_t>(e.tokens.size());
  }

  // forward(), then the token of each logits row (`which` is last or all) instead of the rows.
  // Models that hold their logits on a GPU pick there, so only the ids cross to the host, and say
  // so with picks_on_device(); this default picks on the host with the same semantics
  // (ops/ref/sampling.h). The ids are valid until the next call.
  virtual std::span<const int32_t> forward_pick(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which,
                                                const TokenPick& pick) {
    Tensor logits = forward(tokens, state, which);
    Tensor ids = Tensor::zeros({logits.dim(0)}, DType::i32);
    const Tensor allowed = pick_masks(pick, logits.dim(0));
    if (pick.greedy) ops::argmax_rows(logits, ids, allowed);
    else ops::sample_rows(logits, pick.sampling, pick.uniforms, ids, allowed);
    picked_.assign(ids.data<int32_t>(), ids.data<int32_t>() + ids.dim(0));
    return picked_;
  }
  // pick.masks() as a host (rows, row_words) u32 view for ops' `allowed`; undefined when no row is
  // masked. Throws internal when the masks do not cover `rows` rows.
  static Tensor pick_masks(const TokenPick& pick, int64_t rows) {
    if (!pick.masks) return {};
    const RowMasks m = pick.masks();
    if (m.words.empty()) return {};
    check(m.row_words > 0 && static_cast<int64_t>(m.words.size()) == rows * m.row_words, ErrorKind::internal,
          "TokenPick::masks: " + std::to_string(m.words.size()) + " words for " + std::to_string(rows) + " rows of " +
              std::to_string(m.row_words));
    return Tensor::view_of(m.words.data(), {rows, m.row_words}, DType::u32, nullptr);
  }
  virtual bool picks_on_device() const { return false; }

  // Chained decode: one-token steps queued back to back, each able to take the token the step before
  // it picked, so that a GPU runs them with no wait for the host in between (the host reads each
  // token while the next step runs). queue_pick queues a step on `token`, or with kPickedToken on
  // the token of the step queued just before on the same state, with nothing else run in between;
  // next_pick returns the token of the oldest step not yet returned, waiting for it; drop_picks
  // forgets the steps not returned (their work stands: the state holds the tokens they fed), as does
  // queueing a step on a given token, which starts a new chain. The default runs each step at once
  // through forward_pick; chains_picks() says that a model queues.
  static constexpr int32_t kPickedToken = -1;
  virtual void queue_pick(int32_t token, SequenceState& state, const TokenPick& pick) {
    if (token == kPickedToken) check_chained(state);
    else unread_.clear();  // a new chain: picks an abandoned one left unread are not its own
    const int32_t fed[1] = {token == kPickedToken ? last_pick_ : token};
    last_pick_ = forward_pick(fed, state, LogitsFor::last, pick)[0];
    unread_.push_back(last_pick_);
    chain_state_ = &state;
    chain_length_ = state.length();
  }
  virtual int32_t next_pick() {
    check(!unread_.empty(), ErrorKind::internal, "next_pick: no queued step left to read");
    const int32_t token = unread_.front();
    unread_.pop_front();
    return token;
  }
  virtual void drop_picks() { unread_.clear(); }
  virtual bool chains_picks() const { return false; }

  // Prompt tokens per forward when a prompt is prefilled in pieces. On the CPU the piece bounds the
  // scratch memory; a GPU prefill dequantizes every weight for the tensor cores once per forward, so
  // there longer pieces pay that once for more tokens.
  virtual int prefill_chunk() const { return 512; }

  // Binds `adapter` for per-request use (model/blocks/row_lora.h): a sequence whose state carries the
  // result (SequenceState::set_lora) gets its low-rank terms on its rows, beside an unmodified base.
  // Throws sanctum::Error naming the adapter tensor for a target this model cannot take unmerged.
  virtual std::shared_ptr<const ServedLora> bind_lora(const std::string& name, std::shared_ptr<const LoraAdapter> adapter,
                                                      int64_t max_rank) const {
    (void)adapter;
    (void)max_rank;
    fail(ErrorKind::unsupported, config_.dir + ": this model cannot serve adapter '" + name + "' unmerged; merge it with --adapter");
  }

  // Bytes of weights one decode step reads (for bandwidth accounting).
  virtual size_t weight_bytes_per_token() const = 0;

 protected:
  explicit Model(ModelConfig config) : config_(std::move(config)) {}
  ModelConfig config_;
  std::vector<int32_t> picked_;  // forward_pick's ids
  // queue_pick's bookkeeping: the state and length the last queued step left, which a kPickedToken
  // step must continue.
  void check_chained(const SequenceState& state) const {
    check(chain_state_ == &state && chain_length_ == state.length(), ErrorKind::internal,
          "queue_pick: kPickedToken needs a step queued just before on the same state");
  }
  const SequenceState* chain_state_ = nullptr;
  int64_t chain_length_ = -1;

 private:
  std::deque<int32_t> unread_;  // the default queue_pick's tokens not yet read
  int32_t last_pick_ = 0;
};

// Loads the checkpoint in `dir` with the architecture its config.json names, with weights, scratch
// and state on `device` (forward's logits always come back to the host; forward_pick's ids too), with
// the optimizations `tuning` leaves on. Throws sanctum::Error (unsupported model_type names the ones
// that load; cuda without a GPU says why). With `verified` (a manifest check's VerifyReport::pinned)
// the weights are mapped from the files the check hashed. With `adapter` (LoraAdapter::load) its
// LoRA / DoRA deltas are merged into the weights as they load (Checkpoint::attach_adapter).
std::unique_ptr<Model> load_model(const std::string& dir, Device device = Device::cpu, const Tuning& tuning = Tuning{},
                                  const PinnedFiles* verified = nullptr, std::shared_ptr<const LoraAdapter> adapter = nullptr);

}  // namespace sanctum
