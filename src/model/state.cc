#include "model/state.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "base/error.h"
#include "base/tuning.h"
#include "tensor/device_rows.h"
#include "tensor/host_rows.h"

namespace sanctum {

namespace {
std::atomic<uint64_t> next_writer_id{1};

// Address space one cache (K and V) reserves at most: a checkpoint may declare a context far longer
// than any sequence reaches.
constexpr size_t kMaxReserveBytes = size_t{32} << 30;

// Bytes of one row of `layout`.
size_t row_bytes_of(const Tensor& layout) {
  size_t b = dtype_size(layout.dtype());
  for (int i = 1; i < layout.ndim(); ++i) b *= static_cast<size_t>(layout.dim(i));
  return b;
}

int64_t whole_units(int64_t tokens, int64_t unit) { return (tokens + unit - 1) / unit * unit; }

// Whole units, and at least half again the current capacity, so long prompts fed in pieces do not
// copy quadratically.
int64_t grown_capacity(int64_t tokens, int64_t current, int64_t unit) {
  return std::max(whole_units(tokens, unit), current + current / 2 / unit * unit);
}

// Rows of each tensor of a cache in `dtype` (keys' data and scales, then values'), in bytes.
std::vector<size_t> tensor_row_bytes(int64_t n_kv_heads, int64_t head_dim, ops::KvCacheDtype dtype) {
  std::vector<size_t> rows;
  for (ops::KvFormat format : {ops::key_format(dtype), ops::value_format(dtype)}) {
    const ops::KvRows layout = ops::KvRows::zeros(0, n_kv_heads, head_dim, format, Device::cpu);
    for (const Tensor* t : {&layout.data, &layout.scales})
      if (*t) rows.push_back(row_bytes_of(*t));
  }
  return rows;
}

// Rows per granule that every tensor of such a cache maps on the GPU at once; 0 where one cannot.
int64_t device_granule_rows(int64_t n_kv_heads, int64_t head_dim, ops::KvCacheDtype dtype) {
  int64_t most = 0;
  for (size_t bytes : tensor_row_bytes(n_kv_heads, head_dim, dtype)) {
    const int64_t rows = DeviceRows::granule_rows_for(bytes);
    if (rows == 0) return 0;
    most = std::max(most, rows);
  }
  return most;
}

// Rows per granule of a GPU cache that maps granules (the kv_shared_pages knob on, and rows that
// can); 0 for one whose storage grows by copying.
int64_t mapped_granule_rows(int64_t n_kv_heads, int64_t head_dim, ops::KvCacheDtype dtype) {
  return current_tuning().on(Knob::kv_shared_pages) ? device_granule_rows(n_kv_heads, head_dim, dtype) : 0;
}

// `layout` (a tensor of ops::KvRows::zeros with no rows) with `rows` rows over memory at `base`.
Tensor rows_over(const Tensor& layout, int64_t rows, void* base, std::shared_ptr<const void> keepalive, Device device) {
  int64_t shape[kMaxDims];
  for (int i = 0; i < layout.ndim(); ++i) shape[i] = i == 0 ? rows : layout.dim(i);
  return Tensor::view_of(base, shape, layout.ndim(), layout.dtype(), std::move(keepalive), device);
}

}  // namespace

KvCache::KvCache(int64_t n_kv_heads, int64_t head_dim, Device device, ops::KvCacheDtype dtype, int64_t reserve_tokens)
    : n_kv_heads_(n_kv_heads), head_dim_(head_dim), device_(device), dtype_(dtype),
      reserve_tokens_(reserve_tokens > 0 ? reserve_tokens : kDefaultReserveTokens) {
  if (device_ == Device::cpu) return;
  const int64_t granule = mapped_granule_rows(n_kv_heads, head_dim, dtype);
  mapped_ = granule > 0;
  unit_ = std::max(kBlockTokens, granule);
}

int64_t KvCache::commit_rows(int64_t n_kv_heads, int64_t head_dim, Device device, ops::KvCacheDtype dtype) {
  return device == Device::cpu ? kBlockTokens : std::max(kBlockTokens, mapped_granule_rows(n_kv_heads, head_dim, dtype));
}

bool KvCache::maps_shared_rows(int64_t n_kv_heads, int64_t head_dim, Device device, ops::KvCacheDtype dtype) {
  if (device == Device::cpu) return current_tuning().on(Knob::kv_shared_pages) && HostRows::available();
  return mapped_granule_rows(n_kv_heads, head_dim, dtype) > 0;
}

std::shared_ptr<KvCache::Storage> KvCache::new_storage(int64_t capacity, int64_t reserve, const Storage* from, int64_t keep) const {
  auto s = std::make_shared<Storage>();
  s->row_bytes = bytes_per_token(n_kv_heads_, head_dim_, dtype_);
  const ops::KvFormat formats[2] = {ops::key_format(dtype_), ops::value_format(dtype_)};
  if (!mapped_) {
    s->k = ops::KvRows::zeros(capacity, n_kv_heads_, head_dim_, formats[0], device_);
    s->v = ops::KvRows::zeros(capacity, n_kv_heads_, head_dim_, formats[1], device_);
    s->capacity.store(capacity, std::memory_order_release);
    if (from && keep > 0) copy_rows(*s, *from, keep);
    return s;
  }
  // The layouts ops::KvRows::zeros makes, laid over address space reserved for `rows` rows.
  auto lay = [&](int64_t rows) {
    s->memory.clear();
    for (int side = 0; side < 2; ++side) {
      const ops::KvRows layout = ops::KvRows::zeros(0, n_kv_heads_, head_dim_, formats[side], Device::cpu);
      ops::KvRows& rows_of_side = side == 0 ? s->k : s->v;
      rows_of_side = ops::KvRows{{}, {}, layout.format, layout.head_dim};
      for (auto [to, from_layout] : {std::pair{&rows_of_side.data, &layout.data}, std::pair{&rows_of_side.scales, &layout.scales}}) {
        if (!*from_layout) continue;
        std::shared_ptr<RowMemory> memory;
        if (device_ == Device::cpu)
          memory = HostRows::reserve(rows, row_bytes_of(*from_layout), current_tuning().on(Knob::kv_shared_pages));
        else memory = DeviceRows::reserve(rows, row_bytes_of(*from_layout));
        if (!memory) return false;
        *to = rows_over(*from_layout, rows, memory->data(), memory, device_);
        s->memory.push_back(std::move(memory));
      }
    }
    return true;
  };
  const int64_t most = static_cast<int64_t>(kMaxReserveBytes / std::max<size_t>(s->row_bytes, 1));
  const int64_t rows = whole_units(std::max(capacity, std::min(reserve, most)), unit_);
  check(lay(rows) || lay(capacity), ErrorKind::io,
        "KvCache: no " + std::string(device_ == Device::cpu ? "" : "GPU ") + "address space left to reserve " + std::to_string(capacity) +
            " rows of " + std::to_string(s->row_bytes) + " bytes; lower --max-seqs or the context length" +
            (device_ == Device::cpu ? ", or raise ulimit -v" : ", or run with --tune kv_shared_pages=0"));
  if (from && keep > 0) {  // same dtype, so the same tensors in the same order
    SANCTUM_CHECK(from->memory.size() == s->memory.size(), ErrorKind::internal, "KvCache: storage of another layout");
    for (size_t i = 0; i < s->memory.size(); ++i) s->memory[i]->share(*from->memory[i], keep);
  }
  grow_in_place(*s, capacity);
  return s;
}

void KvCache::copy_rows(Storage& to, const Storage& from, int64_t rows) {
  for (auto [dst, src] : {std::pair{&to.k, &from.k}, std::pair{&to.v, &from.v}}) {
    dst->data.slice(0, 0, rows).copy_from(src->data.slice(0, 0, rows));
    if (dst->scales) dst->scales.slice(0, 0, rows).copy_from(src->scales.slice(0, 0, rows));
  }
}

bool KvCache::grow_in_place(Storage& s, int64_t capacity) {
  if (s.memory.empty() || capacity > s.k.rows()) return false;
  for (const auto& memory : s.memory) memory->commit(capacity);
  s.capacity.store(std::max(capacity, s.capacity.load(std::memory_order_relaxed)), std::memory_order_release);
  return true;
}

void KvCache::make_writable(Storage& s, int64_t begin, int64_t end) {
  for (const auto& memory : s.memory) memory->make_writable(begin, end);
}

void KvCache::for_each_buffer(const std::function<void(const void*, size_t)>& fn) const {
  if (!storage_) return;
  if (storage_->memory.empty()) {
    fn(storage_.get(), bytes());
    return;
  }
  for (const auto& memory : storage_->memory) memory->for_each_extent(fn);
}

// A copy is a snapshot of the other handle's rows: they become immutable for both.
KvCache::KvCache(const KvCache& other) : KvCache(other.share_prefix(other.rows_)) {
  n_kv_heads_ = other.n_kv_heads_;  // share_prefix leaves these for an empty handle too
  head_dim_ = other.head_dim_;
  device_ = other.device_;
  dtype_ = other.dtype_;
  reserve_tokens_ = other.reserve_tokens_;
  mapped_ = other.mapped_;
  unit_ = other.unit_;
}

KvCache& KvCache::operator=(const KvCache& other) {
  if (this != &other) *this = KvCache(other);
  return *this;
}

KvCache::KvCache(KvCache&& other) noexcept
    : n_kv_heads_(other.n_kv_heads_), head_dim_(other.head_dim_), device_(other.device_), dtype_(other.dtype_),
      reserve_tokens_(other.reserve_tokens_), mapped_(other.mapped_), unit_(other.unit_), storage_(std::move(other.storage_)),
      id_(std::exchange(other.id_, 0)), rows_(other.rows_) {}

KvCache& KvCache::operator=(KvCache&& other) noexcept {
  if (this == &other) return *this;
  release_writer();
  n_kv_heads_ = other.n_kv_heads_;
  head_dim_ = other.head_dim_;
  device_ = other.device_;
  dtype_ = other.dtype_;
  reserve_tokens_ = other.reserve_tokens_;
  mapped_ = other.mapped_;
  unit_ = other.unit_;
  storage_ = std::move(other.storage_);
  id_ = std::exchange(other.id_, 0);
  rows_ = other.rows_;
  return *this;
}

KvCache::~KvCache() { release_writer(); }

uint64_t KvCache::id() {
  if (id_ == 0) id_ = next_writer_id.fetch_add(1, std::memory_order_relaxed);
  return id_;
}

void KvCache::release_writer() {
  if (!storage_ || id_ == 0) return;
  std::lock_guard<std::mutex> lock(storage_->mutex);
  if (storage_->writer == id_) storage_->writer = 0;
}

void KvCache::reserve(int64_t tokens) {
  check(tokens >= 0, ErrorKind::invalid_argument, "KvCache::reserve: negative token count");
  int64_t keep = capacity();  // rows carried into new storage
  if (storage_) {
    std::lock_guard<std::mutex> lock(storage_->mutex);
    if (storage_.use_count() == 1) {  // no snapshot holds it (any more): every row is ours
      storage_->frozen = 0;
      storage_->writer = id();
    } else if (storage_->writer == 0 && rows_ >= storage_->frozen) {
      storage_->writer = id();  // the tail above every snapshot is free: take it
    }
    const bool may_write = storage_->writer == id_ && id_ != 0 && rows_ >= storage_->frozen;
    // Rows another storage maps (a sequence that continued a snapshot) get pages of their own first.
    if (may_write && tokens <= capacity()) return make_writable(*storage_, rows_, tokens);  // write in place
    // Grows in place only storage no snapshot holds: a snapshot's buffer keeps the size the prompt
    // cache counted, and the writer moves its rows out once, into a reservation of its own.
    if (storage_.use_count() == 1 && grow_in_place(*storage_, whole_units(tokens, unit_))) return make_writable(*storage_, rows_, tokens);
    if (!may_write) keep = std::min(rows_, capacity());  // copy-on-write: only our own rows
  }
  // Outgrowing storage of our own (not moving out of a snapshot's): leave room to grow again.
  const bool outgrown = storage_ && keep == capacity();
  std::shared_ptr<Storage> fresh;
  if (mapped_) {
    const int64_t cap = whole_units(std::max(tokens, keep), unit_);
    const bool past_reservation = outgrown && cap > storage_->k.rows();
    fresh = new_storage(cap, std::max(reserve_tokens_, past_reservation ? grown_capacity(cap, storage_->k.rows(), unit_) : cap),
                        storage_.get(), keep);
  } else {
    const int64_t cap = grown_capacity(std::max(tokens, keep), outgrown ? capacity() : 0, unit_);
    fresh = new_storage(cap, cap, storage_.get(), keep);
  }
  release_writer();
  fresh->writer = id();
  storage_ = std::move(fresh);
  make_writable(*storage_, rows_, tokens);  // the rows it shares with the old storage are read-only
}

void KvCache::check_writable() const {
  check(storage_ != nullptr, ErrorKind::internal, "KvCache: reserve() rows before writing them");
  if (storage_.use_count() == 1) return;
  std::lock_guard<std::mutex> lock(storage_->mutex);
  check(id_ != 0 && storage_->writer == id_, ErrorKind::internal,
        "KvCache: writing storage shared with a snapshot; reserve() before writing");
}

ops::KvRows KvCache::keys(int64_t n) const {
  SANCTUM_CHECK(n <= capacity(), ErrorKind::internal, "KvCache: reading rows beyond capacity");
  return storage_->k.slice_rows(0, n);
}

ops::KvRows KvCache::values(int64_t n) const {
  SANCTUM_CHECK(n <= capacity(), ErrorKind::internal, "KvCache: reading rows beyond capacity");
  return storage_->v.slice_rows(0, n);
}

ops::KvRows KvCache::key_rows(int64_t begin, int64_t end) const {
  check_writable();
  SANCTUM_CHECK(end <= capacity(), ErrorKind::internal, "KvCache: writing rows beyond capacity; reserve() them first");
  return storage_->k.slice_rows(begin, end);
}

ops::KvRows KvCache::value_rows(int64_t begin, int64_t end) const {
  check_writable();
  SANCTUM_CHECK(end <= capacity(), ErrorKind::internal, "KvCache: writing rows beyond capacity; reserve() them first");
  return storage_->v.slice_rows(begin, end);
}

size_t KvCache::bytes_per_token(int64_t n_kv_heads, int64_t head_dim, ops::KvCacheDtype dtype) {
  return ops::kv_row_bytes(ops::key_format(dtype), n_kv_heads, head_dim) +
         ops::kv_row_bytes(ops::value_format(dtype), n_kv_heads, head_dim);
}

KvCache KvCache::share_prefix(int64_t n) const {
  KvCache c(n_kv_heads_, head_dim_, device_, dtype_, reserve_tokens_);
  c.mapped_ = mapped_;
  c.unit_ = unit_;
  if (n <= 0 || !storage_) return c;  // a layer without attention (or never written) has nothing to share
  check(n <= capacity(), ErrorKind::internal, "KvCache::share_prefix: rows beyond capacity");
  {
    std::lock_guard<std::mutex> lock(storage_->mutex);
    storage_->frozen = std::max(storage_->frozen, n);
  }
  c.storage_ = storage_;
  c.rows_ = n;
  return c;
}

bool SequenceState::has_recurrent_state() const {
  for (const auto& l : linear_)
    if (l.recurrent) return true;
  return false;
}

void SequenceState::advance(int64_t n) {
  length_ += n;
  for (auto& kv : kv_) kv.set_rows(length_);
}

void SequenceState::truncate(int64_t n) {
  check(n >= 0 && n <= length_, ErrorKind::invalid_argument, "truncate: length out of range");
  check(!has_recurrent_state() || n == length_, ErrorKind::unsupported,
        "truncate: a recurrent (GatedDeltaNet) state cannot be truncated; restore a snapshot instead");
  length_ = n;  // rows past n are simply overwritten by the next forward
  for (auto& kv : kv_) kv.set_rows(n);
}

std::shared_ptr<const SequenceState> SequenceState::snapshot() const {
  auto s = std::make_shared<SequenceState>();
  s->length_ = length_;
  s->rope_delta_ = rope_delta_;
  s->lora_ = lora_;
  for (const auto& kv : kv_) s->kv_.push_back(kv.share_prefix(length_));
  for (const auto& l : linear_) s->linear_.push_back({l.conv ? l.conv.clone() : Tensor{}, l.recurrent ? l.recurrent.clone() : Tensor{}});
  return s;
}

void SequenceState::restore(const SequenceState& snap) { restore(snap, snap.length_); }

void SequenceState::restore(const SequenceState& snap, int64_t length) {
  if (kv_.empty() && linear_.empty()) {  // a default-constructed state takes the snapshot's layout
    kv_.resize(snap.kv_.size());
    linear_.resize(snap.linear_.size());
  }
  check(snap.kv_.size() == kv_.size() && snap.linear_.size() == linear_.size(), ErrorKind::invalid_argument,
        "restore: snapshot belongs to a different model");
  check(length >= 0 && length <= snap.length_, ErrorKind::invalid_argument, "restore: length beyond the snapshot");
  check(length == snap.length_ || !snap.has_recurrent_state(), ErrorKind::unsupported,
        "restore: a recurrent (GatedDeltaNet) state can only be restored at its own length");
  length_ = length;
  rope_delta_ = snap.rope_delta_;
  lora_ = snap.lora_;
  for (size_t i = 0; i < kv_.size(); ++i) kv_[i] = snap.kv_[i].share_prefix(length);
  for (size_t i = 0; i < linear_.size(); ++i)
    linear_[i] = {snap.linear_[i].conv ? snap.linear_[i].conv.clone() : Tensor{},
                  snap.linear_[i].recurrent ? snap.linear_[i].recurrent.clone() : Tensor{}};
}

SequenceState::Checkpoint SequenceState::checkpoint() const {
  Checkpoint c;
  checkpoint(c);
  return c;
}

void SequenceState::checkpoint(Checkpoint& into) const {
  into.length = length_;
  into.rope_delta = rope_delta_;
  into.linear.resize(linear_.size());
  auto keep = [](Tensor& dst, const Tensor& src) {  // reuse dst when it has src's shape: no allocation
    if (!src) {
      dst = Tensor{};
    } else if (dst && dst.ndim() == src.ndim() && std::equal(dst.shape(), dst.shape() + dst.ndim(), src.shape()) &&
               dst.dtype() == src.dtype() && dst.device() == src.device()) {
      dst.copy_from(src);
    } else {
      dst = src.clone();
    }
  };
  for (size_t i = 0; i < linear_.size(); ++i) {
    keep(into.linear[i].conv, linear_[i].conv);
    keep(into.linear[i].recurrent, linear_[i].recurrent);
  }
}

void SequenceState::rewind(const Checkpoint& c) {
  check(c.linear.size() == linear_.size() && c.length <= length_, ErrorKind::invalid_argument,
        "rewind: checkpoint belongs to another sequence or lies ahead of it");
  length_ = c.length;
  rope_delta_ = c.rope_delta;
  for (auto& kv : kv_) kv.set_rows(c.length);
  for (size_t i = 0; i < linear_.size(); ++i) {
    if (!c.linear[i].recurrent) continue;
    linear_[i].conv.copy_from(c.linear[i].conv);
    linear_[i].recurrent.copy_from(c.linear[i].recurrent);
  }
}

size_t SequenceState::bytes() const {
  size_t b = 0;
  for (const auto& kv : kv_) b += kv.bytes();
  for (const auto& l : linear_) b += l.conv.nbytes() + l.recurrent.nbytes();
  return b;
}

}  // namespace sanctum
