#include "model/decoder.h"

#include <algorithm>
#include <deque>
#include <numeric>
#include <optional>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/tuning.h"
#include "model/blocks/attention.h"
#include "model/blocks/gated_attention.h"
#include "model/blocks/mlp.h"
#include "model/blocks/row_lora.h"
#include "model/blocks/workspace.h"
#include "model/mrope.h"
#include "model/vision/vision_tower.h"
#include "ops/ops.h"
#include "ops/precision.h"
#include "tensor/device_memory.h"
#include "tensor/step_graph.h"

namespace sanctum {

namespace {

// A forward's multimodal rows (PromptLayout), or a piece of them.
struct MultimodalView {
  std::span<const int32_t> t, h, w;
  std::span<const float* const> image_row;
  static MultimodalView of(const PromptLayout& l) { return {l.t, l.h, l.w, l.image_row}; }
  MultimodalView sub(size_t begin, size_t count) const {
    return {t.subspan(begin, count), h.subspan(begin, count), w.subspan(begin, count), image_row.subspan(begin, count)};
  }
};

class DecoderModel final : public Model {
 public:
  DecoderModel(ModelConfig config, Checkpoint& ckpt, const DecoderOptions& options) : Model(std::move(config)), options_(options) {
    const ModelConfig& c = config_;
    // The kernels that prepare weights at load read this model's tuning, as its forwards' kernels do.
    const ScopedTuning use(c.tuning);
    check(c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads == 0, ErrorKind::invalid_input,
          c.dir + "/config.json: num_attention_heads must be a multiple of num_key_value_heads");
    check(!c.bool_or("rope_traditional", false), ErrorKind::unsupported,
          c.dir + "/config.json: rope_traditional=true (interleaved RoPE) is not supported");
    check(static_cast<int64_t>(c.layers.size()) == c.num_hidden_layers, ErrorKind::internal, "layer configs missing");
    const QuantConfig& q = c.quant;
    const std::string& p = options.prefix;
    embed_ = ckpt.linear(p + "embed_tokens", c.vocab_size, c.hidden_size, q);
    final_norm_ = ckpt.tensor(p + "norm.weight", {c.hidden_size});
    // Tied when the checkpoint has no lm_head (mlx-lm drops it), whatever the config claims.
    lm_head_ = ckpt.has(options.lm_head + ".weight") ? ckpt.linear(options.lm_head, c.vocab_size, c.hidden_size, q) : embed_;
    ops::prepare_weight(lm_head_);
    // A tied table's lookup reads the prepared lm_head: on the CPU int8 mode repacks it and releases
    // the checkpoint's pages, which the lookup would otherwise fault back in; on the GPU the bf16 mode
    // reorders its bytes in place (WeightLayout::tiles), which the lookup must know to read them.
    if (!ckpt.has(options.lm_head + ".weight")) embed_ = lm_head_;

    const AttentionShape attn{c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim};
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const std::string lp = p + "layers." + std::to_string(i) + ".";
      const LayerConfig& lc = c.layers[static_cast<size_t>(i)];
      Layer layer;
      layer.config = lc;
      layer.input_norm = ckpt.tensor(lp + "input_layernorm.weight", {c.hidden_size});
      layer.post_norm = ckpt.tensor(lp + "post_attention_layernorm.weight", {c.hidden_size});
      if (lc.mixer == MixerKind::gated_delta_net) {
        layer.gdn = std::make_unique<GatedDeltaNetBlock>(ckpt, lp + "linear_attn.", options.gdn, eps(), q);
      } else if (options.gated_attention) {
        layer.gated_attention = std::make_unique<GatedAttentionBlock>(ckpt, lp + "self_attn.", attn, eps(), options.norm_offset, q);
      } else {
        layer.attention = std::make_unique<AttentionBlock>(ckpt, lp + "self_attn.", attn, options.qkv_bias, q);
      }
      if (lc.ffn == FfnKind::moe) {
        layer.moe = std::make_unique<MoeBlock>(ckpt, lp + options.moe_module, options.moe, q);
      } else {
        check(c.intermediate_size > 0, ErrorKind::invalid_input, c.dir + "/config.json: missing key 'intermediate_size'");
        layer.mlp = std::make_unique<MlpBlock>(ckpt, lp + "mlp.", c.hidden_size, c.intermediate_size, q);
      }
      layers_.push_back(std::move(layer));
    }
    list_lora_modules(options);
    checkpoint_names_ = ckpt.names();
    rope_ = ops::RopeTable(c.rope);
    if (c.mrope_section.size() == 3 && options.gated_attention) mrope_ = mrope_tables(rope_, c.mrope_section, c.mrope_interleaved);
    ws_ = Workspace(c.device);
    const Tuning& t = c.tuning;
    graphs_ = c.device == Device::cuda && t.on(Knob::cuda_graphs);
    batch_graphs_ = graphs_ && t.on(Knob::batch_graphs);
    // Tokens picked on the GPU (tuning gpu_sampling=0: the logits come to the host, as on the CPU).
    device_picks_ = c.device == Device::cuda && t.on(Knob::gpu_sampling);
    // Allocated now, before any step is recorded: room for a verification's rows without growing.
    if (device_picks_) picked_ids_ = Tensor::zeros({64}, DType::i32, c.device);
    // Decode steps queued back to back (tuning chained_decode=0: each waits for the host, for
    // comparisons).
    chained_ = device_picks_ && graphs_ && t.on(Knob::chained_decode);
    // Norms write bf16 for sub-blocks that take it (tuning norm_bf16_out=0: f32, for comparisons).
    norm_bf16_ = t.on(Knob::norm_bf16_out);
    // Output projections write bf16 where they can (tuning delta_bf16=0: f32, for comparisons).
    delta_bf16_ = t.on(Knob::delta_bf16);
    // The norm between sub-blocks split across the projections around it, for one row on a GPU
    // (tuning fuse_norm=0: an add + RMSNorm launch between them, for comparisons).
    split_norms_ = c.device == Device::cuda && t.on(Knob::fuse_norm);
  }

  std::shared_ptr<const ServedLora> bind_lora(const std::string& name, std::shared_ptr<const LoraAdapter> adapter,
                                              int64_t max_rank) const override {
    check(config_.device == Device::cpu, ErrorKind::unsupported,
          "adapter '" + name + "': unmerged adapters run on the CPU only: serve --lora with --device cpu, or merge it with --adapter");
    return sanctum::bind_lora(name, std::move(adapter), lora_modules_, checkpoint_names_, config_.dir, max_rank);
  }

  SequenceState new_state() const override {
    const ScopedTuning use(config_.tuning);  // kv_shared_pages picks a GPU cache's storage
    std::vector<KvCache> kv(layers_.size());
    std::vector<LinearAttentionState> linear(layers_.size());
    for (size_t i = 0; i < layers_.size(); ++i) {
      if (layers_[i].gdn) linear[i] = layers_[i].gdn->new_state(config_.device);
      else kv[i] = KvCache(config_.num_key_value_heads, config_.head_dim, config_.device, ops::kv_cache_dtype(), config_.context_limit());
    }
    return SequenceState(std::move(kv), std::move(linear));
  }

  Tensor forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which) override {
    const ScopedTuning use(config_.tuning);
    Tensor logits = forward_logits(tokens, state, which);
    if (!logits || logits.device() == Device::cpu) return logits;
    Tensor host = ws_.host(kLogits, logits.dim(0), config_.vocab_size);
    host.copy_from(logits);  // waits for the step to finish
    return host;
  }

  std::vector<ImageEmbeddings> encode_images(const Tensor& pixel_values, std::span<const GridThw> grids) override {
    if (!options_.vision) return Model::encode_images(pixel_values, grids);
    const ScopedTuning use(config_.tuning);
    const Tensor rows = options_.vision->encode(pixel_values, grids);
    const int64_t m = options_.vision->config().spatial_merge_size;
    std::vector<ImageEmbeddings> out;
    int64_t at = 0;
    for (const GridThw& g : grids) {
      ImageEmbeddings e{Tensor{}, g.t, g.h / m, g.w / m};
      e.rows = rows.slice(0, at, at + e.tokens());
      at += e.tokens();
      out.push_back(std::move(e));
    }
    return out;
  }

  Tensor forward_images(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which,
                        std::span<const PromptImage> images) override {
    if (images.empty()) return forward(tokens, state, which);  // a rope_delta the state carries is applied there
    check(mrope_.has_value(), ErrorKind::unsupported,
          config_.dir +
              "/config.json: image input needs multimodal RoPE (rope_parameters.mrope_section with 3 entries) and "
              "gated attention (qwen3_5)");
    const ScopedTuning use(config_.tuning);
    const PromptLayout layout =
        layout_prompt(state.length(), state.rope_delta(), static_cast<int64_t>(tokens.size()), images, config_.hidden_size);
    const MultimodalView view = MultimodalView::of(layout);
    Tensor logits = forward_logits(tokens, state, which, false, &view);
    state.set_rope_delta(layout.next_delta);
    if (!logits || logits.device() == Device::cpu) return logits;
    Tensor host = ws_.host(kLogits, logits.dim(0), config_.vocab_size);
    host.copy_from(logits);
    return host;
  }

  // On the GPU the rows stay there: argmax or sampling runs after the step (a recorded step is
  // replayed first) and only the ids come back, a few bytes instead of rows x vocab floats. A
  // constrained pick's masks are worked out on the host while the step runs (device_masks).
  std::span<const int32_t> forward_pick(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which,
                                        const TokenPick& pick) override {
    const ScopedTuning use(config_.tuning);
    if (!device_picks_) return Model::forward_pick(tokens, state, which, pick);
    check(which != LogitsFor::none, ErrorKind::invalid_argument, "forward_pick: no logits rows to pick from");
    Tensor logits = forward_logits(tokens, state, which);
    const int64_t rows = logits.dim(0);
    if (picked_ids_.numel() < rows) picked_ids_ = Tensor::zeros({rows}, DType::i32, config_.device);
    Tensor ids = picked_ids_.slice(0, 0, rows);
    const Tensor allowed = device_masks(pick, rows);
    if (pick.greedy) ops::argmax_rows(logits, ids, allowed);
    else ops::sample_rows(logits, pick.sampling, pick.uniforms, ids, allowed);
    picked_.resize(static_cast<size_t>(rows));
    device_memory::cuda_copy(picked_.data(), ids.raw(), static_cast<size_t>(rows) * sizeof(int32_t),
                             device_memory::CopyKind::device_to_host);  // waits for the step and the pick
    return picked_;
  }

  bool picks_on_device() const override { return device_picks_; }

  // A step of one token queued on the stream with its pick; the pick is copied back without a wait
  // and becomes the next step's input on the device (ops::feed_pick), so the GPU never idles while
  // the host reads a token and launches the next step.
  void queue_pick(int32_t token, SequenceState& state, const TokenPick& pick) override {
    const ScopedTuning use(config_.tuning);
    if (!chained_) return Model::queue_pick(token, state, pick);
    if (token == kPickedToken) check_chained(state);
    else tickets_.clear();  // a new chain: picks an abandoned one left unread are not its own
    if (token != kPickedToken && !graphs_) write_step(token, state.length());  // feed_pick's base (recorded steps write it)
    const int32_t fed[1] = {token};
    Tensor logits = forward_logits(fed, state, LogitsFor::last, token == kPickedToken);
    Tensor ids = picked_ids_.slice(0, 0, 1);
    const Tensor allowed = device_masks(pick, 1);
    if (pick.greedy) ops::argmax_rows(logits, ids, allowed);
    else ops::sample_rows(logits, pick.sampling, pick.uniforms, ids, allowed);
    ops::feed_pick(ids, step_);
    tickets_.push_back(device_memory::queue_copy_to_host(ids.raw(), sizeof(int32_t)));
    chain_state_ = &state;
    chain_length_ = state.length();
  }
  int32_t next_pick() override {
    if (!chained_) return Model::next_pick();
    check(!tickets_.empty(), ErrorKind::internal, "next_pick: no queued step left to read");
    int32_t token = 0;
    device_memory::collect_copy(tickets_.front(), &token, sizeof(token));
    tickets_.pop_front();
    return token;
  }
  void drop_picks() override {
    if (!chained_) return Model::drop_picks();
    tickets_.clear();
  }
  bool chains_picks() const override { return chained_; }
  // 4,096 on a GPU: a 4,096-token prompt of the 24B shape then pays the weight dequantization once
  // (in pieces of 2,048 it was ~10% of the prefill, in pieces of 512 ~24%; bench/RESULTS.md), and the
  // activations stay within a few GB.
  int prefill_chunk() const override { return ws_.device() == Device::cuda ? 4096 : 512; }

  // KV rows for a sequence about to hold `end` tokens. Past a sliding window, full attention (what
  // runs here) would no longer be the checkpoint's attention: refused rather than answered wrongly.
  void reserve_kv(SequenceState& state, int64_t end) {
    const int64_t window = config_.attention_window;
    check(window <= 0 || end <= window, ErrorKind::invalid_argument,
          "a sequence of " + std::to_string(end) + " tokens passes this checkpoint's sliding window of " + std::to_string(window) +
              " (config.json sliding_window): sliding-window attention is not implemented, so sequences are capped at the window");
    for (size_t i = 0; i < layers_.size(); ++i)
      if (!layers_[i].gdn) state.kv(i).reserve(end);
  }

  // forward() with the logits left where they were computed (the kLogits scratch). chained: one token,
  // the one feed_pick left on the device (queue_pick with kPickedToken); tokens[0] is not read.
  Tensor forward_logits(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which, bool chained = false,
                        const MultimodalView* mm = nullptr) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    check(n > 0, ErrorKind::invalid_argument, "forward: no tokens");
    chain_state_ = nullptr;  // the device's next input is no longer a queued step's pick
    const int64_t pos0 = state.length();
    // Text after an image: rotary positions offset from the cache rows by the state's rope_delta.
    PromptLayout text_layout;
    MultimodalView text_view;
    if (mm == nullptr && state.rope_delta() != 0) {
      check(mrope_.has_value(), ErrorKind::internal, "a rope_delta on a model without multimodal RoPE");
      text_layout = layout_prompt(pos0, state.rope_delta(), n, {}, config_.hidden_size);
      text_view = MultimodalView::of(text_layout);
      mm = &text_view;
    }
    positions_.resize(static_cast<size_t>(n));
    std::iota(positions_.begin(), positions_.end(), static_cast<int32_t>(pos0));
    reserve_kv(state, pos0 + n);

    if (config_.device == Device::cpu && which != LogitsFor::all && n > kPieceTokens) return forward_in_pieces(tokens, state, which, mm);
    if (n == 1 && graphs_ && mm == nullptr) {
      decode_recorded(tokens[0], state, which, chained);
    } else {
      if (n == 1 && graphs_ && !chained && chained_) write_step(tokens[0], pos0);  // feed_pick's base, as a recorded step writes it
      Tensor h = ws_.get(kHidden, n, config_.hidden_size);
      if (chained) ops::embedding(embed_, step_.slice(0, 0, 1), h);  // recording was given up mid-chain
      else ops::embedding(embed_, tokens, h);
      BatchRows rows{{}, {positions_, nullptr}, {}, {}};
      const SequenceRows one{0, n, &state};
      rows.sequences = {&one, 1};
      if (mm != nullptr) {
        put_image_rows(*mm, h);
        rows.mrope = {mm->t, mm->h, mm->w, &*mrope_};
      }
      run_layers(h, rows, logits_rows(0, n, which));
    }
    state.advance(n);
    if (which == LogitsFor::none) return Tensor{};
    return ws_.get(kLogits, which == LogitsFor::last ? 1 : n, config_.vocab_size);
  }

  // Image placeholders' rows of h (n, hidden) replaced by their image rows (host f32), each run of
  // rows adjacent on both sides in one copy (one upload per image on a GPU, not one per token).
  void put_image_rows(const MultimodalView& mm, Tensor& h) const {
    const int64_t d = config_.hidden_size;
    for (size_t i = 0; i < mm.image_row.size();) {
      if (mm.image_row[i] == nullptr) {
        ++i;
        continue;
      }
      size_t end = i + 1;
      while (end < mm.image_row.size() && mm.image_row[end] == mm.image_row[end - 1] + d) ++end;
      const int64_t rows = static_cast<int64_t>(end - i);
      Tensor dst = h.slice(0, static_cast<int64_t>(i), static_cast<int64_t>(end));
      dst.copy_from(Tensor::view_of(mm.image_row[i], {rows, d}, DType::f32, nullptr, Device::cpu));
      i = end;
    }
  }

  // The batch's rows through the layers together (batch_rows.h); a batch of one is forward() with
  // everything that path has (recorded steps, pieces).
  Tensor forward_batch(std::span<const BatchEntry> batch) override {
    if (batch.size() == 1) return forward(batch[0].tokens, *batch[0].state, batch[0].which);
    for (const BatchEntry& e : batch)  // a sequence with an image: its rotary positions go one sequence at a time
      if (e.state->rope_delta() != 0) return Model::forward_batch(batch);
    const ScopedTuning use(config_.tuning);
    chain_state_ = nullptr;
    batch_tokens_.clear();
    positions_.clear();
    sequences_.clear();
    logits_ranges_.clear();
    for (const BatchEntry& e : batch) {
      const int64_t begin = static_cast<int64_t>(batch_tokens_.size()), n = static_cast<int64_t>(e.tokens.size());
      check(n > 0, ErrorKind::invalid_argument, "forward_batch: an entry has no tokens");
      for (const SequenceRows& other : sequences_)
        check(other.state != e.state, ErrorKind::invalid_argument, "forward_batch: a state appears twice in one batch");
      batch_tokens_.insert(batch_tokens_.end(), e.tokens.begin(), e.tokens.end());
      const int64_t pos0 = e.state->length();
      for (int64_t i = 0; i < n; ++i) positions_.push_back(static_cast<int32_t>(pos0 + i));
      reserve_kv(*e.state, pos0 + n);
      sequences_.push_back({begin, begin + n, e.state});
      const auto rows = logits_rows(begin, begin + n, e.which);
      logits_ranges_.insert(logits_ranges_.end(), rows.begin(), rows.end());
    }
    const int64_t n = static_cast<int64_t>(batch_tokens_.size());
    if (!decode_batch_recorded(n)) {
      Tensor h = ws_.get(kHidden, n, config_.hidden_size);
      ops::embedding(embed_, batch_tokens_, h);
      run_layers(h, BatchRows{sequences_, {positions_, nullptr}, {}, {}}, logits_ranges_);
    }
    for (const SequenceRows& s : sequences_) s.state->advance(s.end - s.begin);
    int64_t rows = 0;
    for (const RowRange& r : logits_ranges_) rows += r.end - r.begin;
    if (rows == 0) return Tensor{};
    Tensor logits = ws_.get(kLogits, rows, config_.vocab_size);
    if (logits.device() == Device::cpu) return logits;
    Tensor host = ws_.host(kLogits, rows, config_.vocab_size);
    host.copy_from(logits);
    return host;
  }

  size_t weight_bytes_per_token() const override {
    size_t b = lm_head_.nbytes() + final_norm_.nbytes();
    for (const auto& l : layers_) {
      b += l.input_norm.nbytes() + l.post_norm.nbytes();
      if (l.gdn) b += l.gdn->weight_bytes();
      if (l.attention) b += l.attention->weight_bytes();
      if (l.gated_attention) b += l.gated_attention->weight_bytes();
      if (l.mlp) b += l.mlp->weight_bytes();
      if (l.moe) b += l.moe->weight_bytes_per_token();
    }
    return b;
  }

 private:
  enum Slot : size_t { kHidden, kNormed, kDelta, kLogits, kNormU, kNormSquares, kLogitsInput };

  // Rows of the batch's final hidden states that get logits.
  struct RowRange {
    int64_t begin = 0, end = 0;
  };
  static std::vector<RowRange> logits_rows(int64_t begin, int64_t end, LogitsFor which) {
    if (which == LogitsFor::none) return {};
    return {{which == LogitsFor::last ? end - 1 : begin, end}};
  }

  // On the CPU a long prompt runs in pieces: the per-token scratch (residual stream, attention and
  // MLP buffers) then never outgrows a piece, and it is most of what a forward holds besides the
  // weights and the cache. Pieces end on absolute multiples of kPieceTokens, itself a multiple of the
  // GatedDeltaNet chunk, so every layer sees the same chunks and the numbers do not change.
  static constexpr int64_t kPieceTokens = 128;
  static_assert(kPieceTokens % GatedDeltaNetBlock::kChunk == 0, "pieces must not split GatedDeltaNet chunks differently");
  Tensor forward_in_pieces(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which, const MultimodalView* mm) {
    Tensor logits;
    for (size_t done = 0; done < tokens.size();) {
      const int64_t pos = state.length();
      const size_t m = std::min(tokens.size() - done, static_cast<size_t>(kPieceTokens - pos % kPieceTokens));
      const LogitsFor piece_which = done + m == tokens.size() ? which : LogitsFor::none;
      if (mm != nullptr) {
        const MultimodalView piece = mm->sub(done, m);
        logits = forward_logits(tokens.subspan(done, m), state, piece_which, false, &piece);
      } else {
        logits = forward(tokens.subspan(done, m), state, piece_which);
      }
      done += m;
    }
    return logits;
  }

  // Everything after the embedding, h (n, hidden) holding it: the layers, then the final norm and
  // LM head into the kLogits scratch for the rows `wanted` names, in order.
  void run_layers(Tensor& h, const BatchRows& batch, std::span<const RowRange> wanted) {
    const int64_t n = h.dim(0), hidden = config_.hidden_size;
    // A slot's (n, hidden) scratch: f32, or bf16 (made on first use).
    auto f32_or_bf16 = [&](size_t slot, Tensor& f32, Tensor& bf16, bool want_bf16) -> Tensor& {
      if (!want_bf16) return f32;
      if (!bf16) bf16 = ws_.get_typed(slot, n, hidden, DType::bf16);
      return bf16;
    };
    // The normalised input of each sub-block: f32, or bf16 for a sub-block whose projections round it
    // to bf16 anyway (a GPU prompt in the fast mode), which then skip a conversion pass over it.
    Tensor x32 = ws_.get(kNormed, n, hidden), x16;
    auto input = [&](bool bf16) -> Tensor& { return f32_or_bf16(kNormed, x32, x16, bf16); };
    auto attention_input = [&](const Layer& l) -> Tensor& { return input(norm_bf16_ && l.attention && l.attention->takes_bf16_input(n)); };
    auto mlp_input = [&](const Layer& l) -> Tensor& { return input(norm_bf16_ && l.mlp && l.mlp->takes_bf16_input(n)); };
    // Each sub-block's output, which add_rms_norm adds to h: f32, or bf16 where the sub-block's output
    // projection writes it so (a GPU prompt in the fast mode; its residual adds then take the delta
    // rounded to bf16, as a bf16 model's do, and read half the bytes).
    Tensor delta32 = ws_.get(kDelta, n, hidden), delta16;
    auto delta_of = [&](DType type) -> Tensor& { return f32_or_bf16(kDelta, delta32, delta16, delta_bf16_ && type == DType::bf16); };
    const float off = options_.norm_offset;
    // Between sub-blocks: h += delta, then the next norm. For one row on a GPU, a sub-block's last
    // projection offers to do both halves' work (block_output.h: h += its output, with u and the
    // squares of h for the next norm), and the next sub-block's projections finish the norm as they
    // read u (block_input.h, scaled); a MoE block's combine does the first half likewise. Elsewhere,
    // and for a MoE block's input (its router, experts and shared expert would each take x), the next
    // input is pending: add_rms_norm at its first use.
    const bool split_norms = n == 1 && split_norms_;
    Tensor u = split_norms ? ws_.get(kNormU, 1, hidden) : Tensor();
    Tensor squares = split_norms ? ws_.get(kNormSquares, 1, (hidden / 16 + 3) / 4 * 4) : Tensor();  // whole 16-byte groups
    const Tensor* delta = nullptr;
    ops::ScaledInput scaled;  // count 0: none
    auto input_for = [&](const Tensor& weight, Tensor& x) -> BlockInput {
      if (scaled.count > 0) return BlockInput(scaled, x);
      return BlockInput(h, delta, weight, eps(), off, x);
    };
    // The output of a block whose next norm has `next_weight` (null: leave it as delta).
    auto output_for = [&](Tensor& out, const Tensor* next_weight) -> BlockOutput {
      if (!split_norms || next_weight == nullptr) return BlockOutput(out);
      return BlockOutput(out, ops::ResidualNorm{&h, next_weight, off, &u, &squares});
    };
    auto after = [&](const BlockInput& in, const BlockOutput& out) {
      in.finish();
      scaled = out.into_residual() ? ops::ScaledInput{&u, &squares, out.squares(), eps()} : ops::ScaledInput{};
      delta = out.into_residual() ? nullptr : &out.delta();
    };
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& layer = layers_[i];
      const bool last = i + 1 == layers_.size();
      {
        const BlockInput x = input_for(layer.input_norm, attention_input(layer));
        const Tensor* next = layer.moe ? nullptr : &layer.post_norm;
        if (layer.gdn) {
          const BlockOutput out = output_for(delta_of(layer.gdn->output_dtype(n)), next);
          layer.gdn->forward(x, batch, i, ws_, out);
          after(x, out);
        } else if (layer.gated_attention) {
          const BlockOutput out = output_for(delta_of(layer.gated_attention->output_dtype(n)), next);
          layer.gated_attention->forward(x, batch, i, rope_, ws_, out);
          after(x, out);
        } else {
          const BlockOutput out = output_for(delta_of(layer.attention->output_dtype(n)), next);
          layer.attention->forward(x, batch, i, rope_, ws_, out);
          after(x, out);
        }
      }
      const BlockInput x = input_for(layer.post_norm, mlp_input(layer));
      // The last layer's output goes to ops::add, or straight into h with the final norm prepared.
      const Tensor* next = last ? (wanted.empty() ? nullptr : &final_norm_) : &layers_[i + 1].input_norm;
      if (layer.moe) {
        const BlockOutput out = output_for(delta32, next);
        layer.moe->forward(x, batch, ws_, out);
        after(x, out);
      } else {
        const BlockOutput out = output_for(delta_of(last ? DType::f32 : layer.mlp->output_dtype(n)), next);
        layer.mlp->forward(x, batch, ws_, out);
        after(x, out);
      }
    }
    if (delta != nullptr) ops::add(h, *delta, h);
    if (wanted.empty()) return;
    Tensor rows;
    if (wanted.size() == 1) {
      rows = h.slice(0, wanted[0].begin, wanted[0].end);
    } else {  // several sequences' rows, gathered
      int64_t count = 0;
      for (const RowRange& r : wanted) count += r.end - r.begin;
      rows = ws_.get(kLogitsInput, count, hidden);
      int64_t at = 0;
      for (const RowRange& r : wanted) {
        Tensor into = rows.slice(0, at, at + r.end - r.begin);
        ops::copy(h.slice(0, r.begin, r.end), into);
        at += r.end - r.begin;
      }
    }
    Tensor normed = x32.slice(0, 0, rows.dim(0));
    Tensor logits = ws_.get(kLogits, rows.dim(0), config_.vocab_size);
    if (scaled.count > 0) {  // n is 1: rows is h
      BlockInput(scaled, normed).matmul(lm_head_, logits);
      return;
    }
    ops::rms_norm(rows, final_norm_, eps(), normed, off);
    ops::matmul(normed, lm_head_, logits);
  }

  // One token on the GPU. The step is recorded once (a CUDA graph) per set of buffers it touches and
  // replayed after that; the token and its position reach it through device memory written before
  // each replay (chained: left there by feed_pick). A changed buffer set (a new sequence, a grown cache,
  // reallocated scratch) runs the step directly once, which also allocates whatever it needs, and
  // records on the next token.
  void decode_recorded(int32_t token, SequenceState& state, LogitsFor which, bool chained) {
    if (!chained) write_step(token, state.length());
    Tensor ids = step_.slice(0, 0, 1), position = step_.slice(0, 1, 2);
    auto enqueue = [&] {
      Tensor h = ws_.get(kHidden, 1, config_.hidden_size);
      ops::embedding(embed_, ids, h);
      const SequenceRows one{0, 1, &state};
      run_layers(h, BatchRows{{&one, 1}, {positions_, &position}, {}, {}}, logits_rows(0, 1, which));
    };
    recording_key(state, which, current_key_);
    auto key_after = [&](KeyedStep::Key& key) { recording_key(state, which, key); };
    if (!step_graph_.run(current_key_, key_after, enqueue)) {
      log::warn("decode step graphs disabled; launching kernels one by one", {{"reason", step_graph_.last_error()}});
      graphs_ = false;
    }
  }

  // forward_batch's decode step (every sequence one token) on the GPU, recorded once per set of
  // sequences' buffers and replayed while the set holds, as decode_recorded does for one sequence:
  // the tokens and positions reach the step through device memory written before each replay, and
  // the position-dependent ops read them there (BatchRows::device_positions). A changed set (a
  // sequence joined or left, a cache grew) runs the step directly once and records on the next.
  // Each batch size keeps its own recording, so that a set of a size seen before (sequences come and
  // go) updates that size's recording in place instead of building one anew.
  // False where it does not apply (the caller launches the step itself).
  bool decode_batch_recorded(int64_t n) {
    if (!batch_graphs_ || n > kMaxRecordedRows || static_cast<size_t>(n) != sequences_.size()) return false;
    if (!batch_step_) batch_step_ = Tensor::zeros({2 * kMaxRecordedRows}, DType::i32, config_.device);
    for (int32_t token : batch_tokens_) check_token(token);
    // [tokens | positions], the positions at kMaxRecordedRows: one upload.
    batch_inputs_.assign(static_cast<size_t>(kMaxRecordedRows + n), 0);
    std::copy(batch_tokens_.begin(), batch_tokens_.end(), batch_inputs_.begin());
    std::copy(positions_.begin(), positions_.end(), batch_inputs_.begin() + kMaxRecordedRows);
    device_memory::cuda_copy(batch_step_.raw(), batch_inputs_.data(), batch_inputs_.size() * sizeof(int32_t),
                             device_memory::CopyKind::host_to_device);
    const Tensor ids = batch_step_.slice(0, 0, n), positions = batch_step_.slice(0, kMaxRecordedRows, kMaxRecordedRows + n);
    sequence_positions_.clear();
    for (int64_t i = 0; i < n; ++i) sequence_positions_.push_back(positions.slice(0, i, i + 1));
    auto enqueue = [&] {
      Tensor h = ws_.get(kHidden, n, config_.hidden_size);
      ops::embedding(embed_, ids, h);
      run_layers(h, BatchRows{sequences_, {positions_, &positions}, {}, sequence_positions_}, logits_ranges_);
    };
    if (batch_graphs_by_size_.empty()) batch_graphs_by_size_.resize(static_cast<size_t>(kMaxRecordedRows + 1));
    batch_key(current_key_);
    KeyedStep& step = batch_graphs_by_size_[static_cast<size_t>(n)];
    auto key_after = [&](KeyedStep::Key& key) { batch_key(key); };
    if (!step.run(current_key_, key_after, enqueue)) {
      log::warn("batched decode step graphs disabled; launching kernels one by one", {{"reason", step.last_error()}});
      batch_graphs_ = false;
      batch_graphs_by_size_.clear();
    }
    return true;
  }

  // recording_key for a batched step: every sequence's buffers, in order, and its logits rows.
  void batch_key(std::vector<uint64_t>& key) const {
    key.clear();
    key.push_back(device_memory::cuda_allocations());
    key.push_back(static_cast<uint64_t>(ops::matmul_precision()));
    for (const RowRange& r : logits_ranges_) {
      key.push_back(static_cast<uint64_t>(r.begin));
      key.push_back(static_cast<uint64_t>(r.end));
    }
    for (const SequenceRows& s : sequences_) {
      key.push_back(static_cast<uint64_t>(s.end - s.begin));
      add_state_key(*s.state, key);
    }
  }

  // The pick's masks (TokenPick::masks), asked for once the step is queued, so that the host's grammar
  // work overlaps the GPU's forward, and queued on the stream through pinned staging (no wait) into a
  // device buffer of (rows, row_words) u32; undefined when no row is masked. The buffer is outside
  // any recorded step (picks run after the replay), but allocating it re-records the step: it is
  // made once with room for as many rows as picked_ids_ holds (a verification's).
  Tensor device_masks(const TokenPick& pick, int64_t rows) {
    const Tensor host = pick_masks(pick, rows);
    if (!host) return {};
    const int64_t words = host.numel();
    if (row_masks_.numel() < words)
      row_masks_ = Tensor::zeros({std::max(words, host.dim(1) * picked_ids_.numel())}, DType::u32, config_.device);
    Tensor allowed = row_masks_.slice(0, 0, words).reshape({rows, host.dim(1)});
    device_memory::cuda_upload(allowed.raw(), host.raw(), host.nbytes());
    return allowed;
  }

  // A token the device's step input may hold (the embedding's own check cannot see device ids).
  void check_token(int32_t token) const {
    check(token >= 0 && token < embed_.rows, ErrorKind::invalid_argument,
          "[embedding] token id " + std::to_string(token) + " is outside the vocabulary [0, " + std::to_string(embed_.rows) + ")");
  }

  // The device's step input: token and position.
  void write_step(int32_t token, int64_t position) {
    check_token(token);
    if (!step_) step_ = Tensor::zeros({2}, DType::i32, config_.device);
    const int32_t values[2] = {token, static_cast<int32_t>(position)};
    device_memory::cuda_copy(step_.raw(), values, sizeof(values), device_memory::CopyKind::host_to_device);
  }

  // Identifies everything a recorded step bakes in: the state's buffers, every other device buffer
  // (any allocation may have replaced a scratch buffer the step uses), the logits rows and the
  // matmul precision (which picks kernels). Filled into `key`, a member reused every step.
  void recording_key(SequenceState& state, LogitsFor which, std::vector<uint64_t>& key) const {
    key.clear();
    key.push_back(device_memory::cuda_allocations());
    key.push_back(static_cast<uint64_t>(which));
    key.push_back(static_cast<uint64_t>(ops::matmul_precision()));
    add_state_key(state, key);
  }

  // The state's buffers, as a recorded step bakes them in.
  void add_state_key(SequenceState& state, std::vector<uint64_t>& key) const {
    auto add = [&key](uint64_t v) { key.push_back(v); };
    for (size_t i = 0; i < layers_.size(); ++i) {
      if (layers_[i].gdn) {
        add(reinterpret_cast<uintptr_t>(state.linear(i).conv.raw()));
        add(reinterpret_cast<uintptr_t>(state.linear(i).recurrent.raw()));
      } else {
        const KvCache& cache = state.kv(i);
        add(static_cast<uint64_t>(cache.capacity()));
        add(reinterpret_cast<uintptr_t>(cache.keys(0).data.raw()));
        add(reinterpret_cast<uintptr_t>(cache.values(0).data.raw()));
      }
    }
  }

  struct Layer {
    LayerConfig config;
    Tensor input_norm, post_norm;
    std::unique_ptr<AttentionBlock> attention;
    std::unique_ptr<GatedAttentionBlock> gated_attention;
    std::unique_ptr<GatedDeltaNetBlock> gdn;
    std::unique_ptr<MlpBlock> mlp;
    std::unique_ptr<MoeBlock> moe;
  };
  float eps() const { return static_cast<float>(config_.rms_norm_eps); }

  // The projections a per-request adapter may target, (out, in) each, and the checkpoint's tensor
  // names, against which an adapter's targets are placed (bind_lora).
  void list_lora_modules(const DecoderOptions& o) {
    const ModelConfig& c = config_;
    const int64_t hidden = c.hidden_size, q_dim = c.num_attention_heads * c.head_dim, kv_dim = c.num_key_value_heads * c.head_dim;
    auto mlp = [&](const std::string& prefix, int64_t intermediate) {
      lora_modules_[prefix + "gate_proj"] = {intermediate, hidden};
      lora_modules_[prefix + "up_proj"] = {intermediate, hidden};
      lora_modules_[prefix + "down_proj"] = {hidden, intermediate};
    };
    for (size_t i = 0; i < layers_.size(); ++i) {
      const std::string lp = o.prefix + "layers." + std::to_string(i) + ".";
      const Layer& l = layers_[i];
      if (l.gdn) {
        const std::string p = lp + "linear_attn.";
        const GatedDeltaNetShape& g = o.gdn;
        lora_modules_[p + "in_proj_qkv"] = {g.conv_dim(), hidden};
        lora_modules_[p + "in_proj_z"] = {g.value_dim(), hidden};
        lora_modules_[p + "in_proj_b"] = {g.heads.n_value_heads, hidden};
        lora_modules_[p + "in_proj_a"] = {g.heads.n_value_heads, hidden};
        lora_modules_[p + "out_proj"] = {hidden, g.value_dim()};
      } else {
        const std::string p = lp + "self_attn.";
        lora_modules_[p + "q_proj"] = {l.gated_attention ? 2 * q_dim : q_dim, hidden};
        lora_modules_[p + "k_proj"] = {kv_dim, hidden};
        lora_modules_[p + "v_proj"] = {kv_dim, hidden};
        lora_modules_[p + "o_proj"] = {hidden, q_dim};
      }
      if (l.mlp) mlp(lp + "mlp.", c.intermediate_size);
      else if (l.moe && o.moe.shared_expert_intermediate > 0) mlp(lp + o.moe_module + "shared_expert.", o.moe.shared_expert_intermediate);
    }
  }

  DecoderOptions options_;
  LoraModules lora_modules_;
  std::vector<std::string> checkpoint_names_;
  Weight embed_, lm_head_;
  Tensor final_norm_;
  std::vector<Layer> layers_;
  ops::RopeTable rope_;
  std::optional<MropeTables> mrope_;  // multimodal RoPE's tables (qwen3_5 declaring mrope_section)
  Workspace ws_;
  std::vector<int32_t> positions_;
  // forward_batch's buffers, reused.
  std::vector<int32_t> batch_tokens_;
  std::vector<SequenceRows> sequences_;
  std::vector<RowRange> logits_ranges_;
  // Decode-step recording (CUDA only; tuning cuda_graphs=0 turns it off).
  bool graphs_ = false;
  KeyedStep step_graph_;
  KeyedStep::Key current_key_;  // the step's key (recording_key, batch_key), reused every step
  Tensor step_;                 // i32 [token, position] on the device
  // Recorded batched decode steps (tuning batch_graphs=0 turns them off).
  static constexpr int64_t kMaxRecordedRows = 64;
  bool batch_graphs_ = false;
  std::vector<KeyedStep> batch_graphs_by_size_;  // made on first use
  // i32 (2 kMaxRecordedRows) on the device: tokens, then positions at kMaxRecordedRows.
  Tensor batch_step_;
  std::vector<int32_t> batch_inputs_;
  std::vector<Tensor> sequence_positions_;
  // Picking on the GPU (CUDA only; tuning gpu_sampling=0 turns it off).
  bool device_picks_ = false;
  Tensor picked_ids_;  // i32 (rows) on the device: forward_pick's ids before they are copied back
  Tensor row_masks_;   // u32 on the device: constrained picks' masks (device_masks)
  // Chained decode (queue_pick): on with device picks and recorded steps (a recording given up later
  // leaves it on: forward_logits then embeds the fed pick from step_); the copies of picks not yet read.
  bool chained_ = false;
  std::deque<uint64_t> tickets_;
  bool norm_bf16_ = true;    // see the constructor
  bool delta_bf16_ = true;   // see the constructor
  bool split_norms_ = true;  // see the constructor
};

}  // namespace

std::unique_ptr<Model> make_decoder(ModelConfig config, Checkpoint& checkpoint, const DecoderOptions& options) {
  return std::make_unique<DecoderModel>(std::move(config), checkpoint, options);
}

}  // namespace sanctum
