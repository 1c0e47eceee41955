#pragma once
// Beast's SyncReadStream read_some, both forms, for a stream that reads into one buffer at a time:
// Derived provides size_t read_into(void* data, size_t size, boost::system::error_code& ec) (it may
// keep it private and befriend this class). Each call fills at most the first non-empty buffer, which
// Beast's parser allows.
#include <cstddef>

#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

namespace sanctum::server {

template <class Derived>
class SyncReadSome {
 public:
  template <class MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers, boost::system::error_code& ec) {
    for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers); ++it) {
      boost::asio::mutable_buffer b(*it);
      if (b.size() > 0) return static_cast<Derived*>(this)->read_into(b.data(), b.size(), ec);
    }
    ec = {};
    return 0;
  }
  template <class MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers) {
    boost::system::error_code ec;
    const size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }
};

}  // namespace sanctum::server
