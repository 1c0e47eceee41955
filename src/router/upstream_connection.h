#pragma once
// One TCP (optionally TLS) connection to an upstream, used by a single thread at a time: blocking
// reads and writes that wait in short poll slices, so they give up at a deadline or as soon as the
// caller says to cancel (the client left). It is a Beast SyncReadStream / SyncWriteStream, so
// Beast's HTTP parser and serializer run directly on it.
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>
#include <openssl/ssl.h>

#include "router/upstream_tls.h"
#include "router/upstream_url.h"
#include "server/sync_read_some.h"

namespace sanctum::router {

class UpstreamConnection : public server::SyncReadSome<UpstreamConnection> {
 public:
  using Clock = std::chrono::steady_clock;

  // Resolves, connects and (for https) handshakes before `deadline`. On failure returns nullptr and
  // sets `error` (and `timed_out` when the deadline was the reason).
  static std::unique_ptr<UpstreamConnection> open(const UpstreamUrl& url, const UpstreamTls* tls, Clock::time_point deadline,
                                                  const std::function<bool()>& cancelled, std::string& error, bool& timed_out);
  ~UpstreamConnection();
  UpstreamConnection(const UpstreamConnection&) = delete;
  UpstreamConnection& operator=(const UpstreamConnection&) = delete;

  // Reads fail with net::error::timed_out past the deadline and operation_aborted once `cancelled`.
  void set_deadline(Clock::time_point deadline) { deadline_ = deadline; }
  void set_cancel(std::function<bool()> cancelled) { cancelled_ = std::move(cancelled); }

  // read_some: SyncReadSome.
  template <class ConstBufferSequence>
  size_t write_some(const ConstBufferSequence& buffers, boost::system::error_code& ec) {
    size_t total = 0;
    for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers); ++it) {
      boost::asio::const_buffer b(*it);
      if (b.size() == 0) continue;
      if (!write_all(static_cast<const char*>(b.data()), b.size(), ec)) return total;
      total += b.size();
    }
    ec = {};
    return total;
  }

  template <class ConstBufferSequence>
  size_t write_some(const ConstBufferSequence& buffers) {
    boost::system::error_code ec;
    const size_t n = write_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

  // An idle pooled connection is still usable: open, and nothing (not even EOF) waiting to be read.
  bool idle_usable() const;
  Clock::time_point idle_since;
  int requests_served = 0;

 private:
  friend class server::SyncReadSome<UpstreamConnection>;
  UpstreamConnection(int fd) : fd_(fd) {}
  size_t read_into(void* data, size_t size, boost::system::error_code& ec);
  bool write_all(const char* data, size_t size, boost::system::error_code& ec);
  // Waits for readiness; false with `ec` set on deadline/cancel/poll failure.
  bool wait(short events, boost::system::error_code& ec);

  int fd_ = -1;
  SSL* ssl_ = nullptr;
  Clock::time_point deadline_ = Clock::time_point::max();
  std::function<bool()> cancelled_;
};

}  // namespace sanctum::router
