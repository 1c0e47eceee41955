// Closed-loop HTTP/1.1 load generator for the router benchmark: C keep-alive connections, one thread
// each, every thread sends a request, reads the whole response, repeats. Records each request's time
// to the first response byte. Prints one JSON line: requests, errors, seconds, rps, ttfb p50/p90/p99.
// Build: g++ -O2 -std=c++20 -pthread -o load load.cc
// Run:   load PORT CONNS (SECONDS | -REQUESTS_PER_CONN) [WARMUP_REQUESTS]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

const std::string kBody = R"({"model":"m","messages":[{"role":"user","content":"What is 2+2?"}],"max_tokens":8})";

int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads one response (Content-Length or chunked); returns false on error. `first_byte` is set when
// the first byte arrives.
bool read_response(int fd, std::string& buf, Clock::time_point& first_byte) {
  bool got_first = false;
  char tmp[65536];
  for (;;) {
    const size_t head_end = buf.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      const std::string head = buf.substr(0, head_end);
      std::string lower = head;
      std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
      if (const size_t cl = lower.find("content-length:"); cl != std::string::npos) {
        const size_t total = head_end + 4 + std::strtoul(head.c_str() + cl + 15, nullptr, 10);
        if (buf.size() >= total) {
          buf.erase(0, total);
          return lower.rfind("http/1.1 200", 0) == 0;
        }
      } else if (lower.find("transfer-encoding: chunked") != std::string::npos) {
        const size_t end = buf.find("\r\n0\r\n\r\n", head_end);
        if (end != std::string::npos) {
          buf.erase(0, end + 7);
          return lower.rfind("http/1.1 200", 0) == 0;
        }
      }
    }
    const ssize_t r = read(fd, tmp, sizeof tmp);
    if (r <= 0) return false;
    if (!got_first) {
      first_byte = Clock::now();
      got_first = true;
    }
    buf.append(tmp, static_cast<size_t>(r));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: load PORT CONNS (SECONDS | -REQUESTS_PER_CONN) [WARMUP_REQUESTS]\n");
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const int conns = std::atoi(argv[2]);
  const double arg = std::atof(argv[3]);
  const int warmup = argc > 4 ? std::atoi(argv[4]) : 50;
  const bool by_count = arg < 0;
  const std::string request =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
      std::to_string(kBody.size()) + "\r\n\r\n" + kBody;
  std::vector<std::vector<double>> samples(conns);
  std::atomic<long> errors{0};
  std::atomic<bool> go{false};
  Clock::time_point stop;
  std::vector<std::thread> threads;
  for (int c = 0; c < conns; ++c) {
    threads.emplace_back([&, c] {
      int fd = connect_to(port);
      if (fd < 0) {
        errors++;
        return;
      }
      std::string buf;
      Clock::time_point first;
      for (int i = 0; i < warmup; ++i) {
        if (write(fd, request.data(), request.size()) <= 0 || !read_response(fd, buf, first)) errors++;
      }
      while (!go.load()) std::this_thread::yield();
      long n = 0;
      for (;;) {
        if (by_count ? n >= static_cast<long>(-arg) : Clock::now() >= stop) break;
        const auto t0 = Clock::now();
        if (write(fd, request.data(), request.size()) <= 0 || !read_response(fd, buf, first)) {
          errors++;
          close(fd);
          fd = connect_to(port);
          if (fd < 0) return;
          continue;
        }
        samples[c].push_back(std::chrono::duration<double, std::milli>(first - t0).count());
        ++n;
      }
      close(fd);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let every warm-up finish
  const auto t_start = Clock::now();
  stop = t_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(by_count ? 1e9 : arg));
  go = true;
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
  std::vector<double> all;
  for (auto& s : samples) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) { return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<size_t>(p * all.size()))]; };
  std::printf(
      "{\"requests\": %zu, \"errors\": %ld, \"seconds\": %.3f, \"rps\": %.1f, \"ttfb_p50_ms\": %.4f, \"ttfb_p90_ms\": %.4f, "
      "\"ttfb_p99_ms\": %.4f}\n",
      all.size(), errors.load(), seconds, all.size() / seconds, pct(0.50), pct(0.90), pct(0.99));
  return 0;
}
