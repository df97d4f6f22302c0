// The server's thread plumbing: the engine-to-HTTP-thread channel, finding a
// connection's socket and noticing its client hang up, and signals delivered
// to a watcher thread.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

#include "server/connection_watch.h"
#include "server/request_channel.h"
#include "server/signal_watcher.h"

using namespace tandem;
using namespace tandem::server;
using namespace std::chrono_literals;

TEST(ServerPlumbing, ChannelHandsOverTextThenTheResult) {
  RequestChannel ch;
  auto t0 = std::chrono::steady_clock::now();
  RequestChannel::News n = ch.wait(30ms);  // nothing yet: times out
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 25ms);
  EXPECT_TRUE(n.text.empty());
  EXPECT_FALSE(n.finished);

  std::thread engine([&] {
    RequestStats stats;
    stats.drafted = 2;
    stats.accepted = 1;
    ch.push({7, false, "Hel", nullptr, &stats});
    ch.push({8, true, "lo", nullptr, &stats});
    std::this_thread::sleep_for(20ms);
    RequestResult r;
    r.text = "Hello!";
    r.finish_reason = FinishReason::Stop;
    ch.push({-1, false, "!", nullptr, nullptr});  // held-back text released at the end
    ch.finish(r);
  });
  std::string text, pieces;
  std::vector<int> ids;
  int drafted = 0, accepted = 0;
  bool finished = false;
  for (int i = 0; i < 200 && !finished; ++i) {
    n = ch.wait(1s);
    text += n.text;
    for (const StreamedToken& t : n.tokens) {
      ids.push_back(t.id);
      pieces += t.text;
    }
    drafted = n.drafted;
    accepted = n.accepted;
    finished = n.finished;
  }
  engine.join();
  EXPECT_TRUE(finished);
  EXPECT_EQ(text, "Hello!");  // all text is handed out by the time finished is seen
  EXPECT_EQ(pieces, text);
  EXPECT_EQ(ids, (std::vector<int>{7, 8, -1}));
  EXPECT_EQ(drafted, 2) << "the counts so far stay with the channel";
  EXPECT_EQ(accepted, 1);
  EXPECT_EQ(ch.result().finish_reason, FinishReason::Stop);
}

namespace {

std::pair<std::string, int> endpoint_of(int fd, bool peer) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (peer)
    getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len);
  else
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
  return {buf, ntohs(a.sin_port)};
}

}  // namespace

TEST(ServerPlumbing, ConnectionWatchSeesTheClientHangUp) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  auto [laddr, lport] = endpoint_of(listener, false);
  a.sin_port = htons(lport);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const int conn = accept(listener, nullptr, nullptr);
  ASSERT_GE(conn, 0);

  auto [raddr, rport] = endpoint_of(conn, true);
  ConnectionWatch watch("127.0.0.1", lport, raddr, rport);
  EXPECT_TRUE(watch.found());
  EXPECT_FALSE(watch.closed());
  ASSERT_EQ(write(client, "GET", 3), 3);  // data from the client is not a hang-up
  EXPECT_FALSE(watch.closed());

  ConnectionWatch nobody("127.0.0.1", lport, raddr, rport + 1);
  EXPECT_FALSE(nobody.found());
  EXPECT_FALSE(nobody.closed());

  close(client);
  bool closed = false;
  for (int i = 0; i < 100 && !closed; ++i) {
    closed = watch.closed();
    if (!closed) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(closed);
  close(conn);
  close(listener);
}

TEST(ServerPlumbing, SignalsReachTheWatcherThread) {
  std::atomic<int> last_count{0}, last_signo{0};
  {
    SignalWatcher w([&](int signo, int count) {
      last_signo = signo;
      last_count = count;
    });
    raise(SIGTERM);
    for (int i = 0; i < 200 && last_count < 1; ++i) std::this_thread::sleep_for(5ms);
    EXPECT_EQ(last_count, 1);
    EXPECT_EQ(last_signo, SIGTERM);
    raise(SIGINT);
    for (int i = 0; i < 200 && last_count < 2; ++i) std::this_thread::sleep_for(5ms);
    EXPECT_EQ(last_count, 2);  // a second signal is counted as such (the server forces then)
    EXPECT_EQ(last_signo, SIGINT);
  }
  // The previous handlers are back: a second watcher can be created.
  EXPECT_NO_THROW(SignalWatcher([](int, int) {}));
}
