#pragma once
// The conversations of /v1/responses answers, kept for `previous_response_id` and for GET / DELETE
// /v1/responses/{id} for the server's lifetime. Bounded by count and bytes: the oldest go first, and an evicted id is answered as an
// unknown one (400 previous_response_not_found, as OpenAI does). Each entry holds its whole
// conversation (chat messages, the answer included), so a chain never depends on an evicted ancestor.
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace sanctum::server {

class ResponseStore {
 public:
  static constexpr size_t kDefaultMaxEntries = 4096;
  static constexpr size_t kDefaultMaxBytes = size_t{64} << 20;

  explicit ResponseStore(size_t max_entries = kDefaultMaxEntries, size_t max_bytes = kDefaultMaxBytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // Keeps `messages` (and the Response object answered) under `id`; one larger than the byte cap
  // is not kept.
  void put(const std::string& id, nlohmann::ordered_json messages, nlohmann::ordered_json response = nullptr);
  std::optional<nlohmann::ordered_json> get(const std::string& id) const;       // the conversation
  std::optional<nlohmann::ordered_json> response(const std::string& id) const;  // the Response object
  bool erase(const std::string& id);                                            // false: not held

  size_t size() const;
  size_t bytes() const;

 private:
  struct Entry {
    nlohmann::ordered_json messages;
    nlohmann::ordered_json response;
    size_t bytes = 0;
  };
  void evict_locked();

  size_t max_entries_, max_bytes_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
  std::deque<std::string> order_;  // oldest first
  size_t bytes_ = 0;
};

}  // namespace sanctum::server
