// A deliberately fast fake upstream for the router benchmark: one epoll thread, keep-alive, answers
// every POST with the same small chat completion and GET with a model list. It must never be the
// bottleneck, so it parses only what it needs (the head end and Content-Length).
// Build: g++ -O2 -std=c++20 -o fake_upstream fake_upstream.cc      Run: fake_upstream PORT
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>

namespace {

const std::string kChat =
    R"({"id":"fake-1","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"The answer is 4."},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10}})";
const std::string kModels = R"({"object":"list","data":[{"id":"m","object":"model"}]})";

std::string response(const std::string& body) {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: keep-alive\r\n\r\n" + body;
}

struct Conn {
  std::string in;
};

// Content-Length of a head (case-insensitive), 0 when absent.
size_t content_length(const std::string& head) {
  for (size_t i = 0; i + 15 < head.size(); ++i) {
    if (strncasecmp(head.c_str() + i, "content-length:", 15) == 0) return std::strtoul(head.c_str() + i + 15, nullptr, 10);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fake_upstream PORT\n");
    return 2;
  }
  const std::string chat = response(kChat), models = response(kModels);
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::atoi(argv[1])));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(lfd, 1024) != 0) {
    std::perror("bind/listen");
    return 1;
  }
  int ep = epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = lfd;
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  std::unordered_map<int, Conn> conns;
  epoll_event events[256];
  char buf[65536];
  std::fprintf(stderr, "fake upstream listening on 127.0.0.1:%s\n", argv[1]);
  for (;;) {
    const int n = epoll_wait(ep, events, 256, -1);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == lfd) {
        for (;;) {
          int c = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK);
          if (c < 0) break;
          setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          epoll_event cev{};
          cev.events = EPOLLIN;
          cev.data.fd = c;
          epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
          conns[c];
        }
        continue;
      }
      Conn& conn = conns[fd];
      bool closed = false;
      for (;;) {
        const ssize_t r = read(fd, buf, sizeof buf);
        if (r > 0) {
          conn.in.append(buf, static_cast<size_t>(r));
          continue;
        }
        if (r == 0) closed = true;
        break;
      }
      std::string out;
      for (;;) {  // every complete request in the buffer (pipelining welcome)
        const size_t end = conn.in.find("\r\n\r\n");
        if (end == std::string::npos) break;
        const size_t total = end + 4 + content_length(conn.in.substr(0, end));
        if (conn.in.size() < total) break;
        out += conn.in.compare(0, 4, "GET ") == 0 ? models : chat;
        conn.in.erase(0, total);
      }
      if (!out.empty()) {
        size_t off = 0;
        while (off < out.size()) {
          const ssize_t w = write(fd, out.data() + off, out.size() - off);
          if (w <= 0) {
            closed = true;
            break;
          }
          off += static_cast<size_t>(w);
        }
      }
      if (closed) {
        epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
        close(fd);
        conns.erase(fd);
      }
    }
  }
}
