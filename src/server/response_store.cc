#include "server/response_store.h"

namespace sanctum::server {

void ResponseStore::put(const std::string& id, nlohmann::ordered_json messages, nlohmann::ordered_json response) {
  // The serialized size stands for the memory held: both grow with the text.
  const auto size_of = [](const nlohmann::ordered_json& j) {
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).size();
  };
  const size_t bytes = size_of(messages) + size_of(response) + id.size();
  if (bytes > max_bytes_ || max_entries_ == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(id);
  if (it != entries_.end()) {
    bytes_ -= it->second.bytes;
    it->second = Entry{std::move(messages), std::move(response), bytes};
  } else {
    entries_.emplace(id, Entry{std::move(messages), std::move(response), bytes});
    order_.push_back(id);
  }
  bytes_ += bytes;
  evict_locked();
}

void ResponseStore::evict_locked() {
  while (!order_.empty() && (entries_.size() > max_entries_ || bytes_ > max_bytes_)) {
    auto it = entries_.find(order_.front());
    bytes_ -= it->second.bytes;
    entries_.erase(it);
    order_.pop_front();
  }
}

std::optional<nlohmann::ordered_json> ResponseStore::get(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second.messages;
}

std::optional<nlohmann::ordered_json> ResponseStore::response(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.response.is_null()) return std::nullopt;
  return it->second.response;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  bytes_ -= it->second.bytes;
  entries_.erase(it);
  for (auto o = order_.begin(); o != order_.end(); ++o)
    if (*o == id) {
      order_.erase(o);
      break;
    }
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

}  // namespace sanctum::server
