// The thread-safe front of the engine (AsyncEngine), driven the way the HTTP
// server drives it: several client threads submit, stream and cancel requests
// while another reads metrics, with the engine's compute pool multi-threaded.
// Run under ThreadSanitizer by `make tsan`; here the outputs are checked: every
// greedy request that was not cancelled gives the tokens it gives run alone,
// and nothing stays allocated afterwards.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "engine/async_engine.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/request_channel.h"
#include "speculative/ngram_drafter.h"
#include "support/paths.h"
#include "support/synthetic_model.h"
#include "support/test_util.h"

using namespace tandem;
using namespace std::chrono_literals;

namespace {

constexpr int kClients = 4;
constexpr int kPerClient = 4;

std::unique_ptr<Model> small_model() {
  test::SyntheticSpec s;
  s.context_length = 256;
  return Model::load(test::write_synthetic_gguf(s, test::temp_dir("async") + "/m.gguf"));
}

EngineOptions options() {
  EngineOptions eo;
  eo.max_batch = 3;
  eo.n_ctx = 256;
  eo.kv.kind = KVCacheConfig::Kind::Paged;
  eo.kv.block_size = 8;
  eo.kv.n_positions = 256;  // small: the batch preempts
  return eo;
}

Request greedy(int client, int i) {
  Request r;
  r.prompt = test::pseudo_random_ids(6 + 5 * i, 384, 1000 * client + i);
  r.params.max_tokens = 12 + 4 * (i % 3);
  r.params.ignore_eos = true;
  return r;
}

// Submits r with its output handed to a channel, as the server does; the
// channel, or null when the submission was refused (*outcome says why).
std::shared_ptr<server::RequestChannel> submit(AsyncEngine& async, Request r,
                                               AsyncEngine::Submit* outcome, int* id) {
  auto channel = std::make_shared<server::RequestChannel>();
  r.on_token = [channel](const TokenOutput& t) { channel->push(t); };
  r.on_finish = [channel](const RequestResult& res) { channel->finish(res); };
  *outcome = async.submit(std::move(r), id);
  return *outcome == AsyncEngine::Submit::Accepted ? channel : nullptr;
}

std::vector<int> run_alone(const Model& m, const Request& r) {
  ThreadPool pool(1);
  Engine e(m, pool, options());
  int id = e.submit(r);
  e.run();
  return e.take_result(id)->tokens;
}

}  // namespace

TEST(AsyncEngine, ConcurrentClientsSubmitStreamAndCancel) {
  auto model = small_model();
  ThreadPool pool(2);
  AsyncEngine async(
      std::make_unique<Engine>(*model, pool, options(), std::make_unique<NgramDrafter>()), 64);
  std::atomic<bool> done{false};
  std::thread metrics_reader([&] {
    while (!done.load()) {
      EngineMetrics m = async.metrics();
      EXPECT_GE(m.kv.blocks_used, 0);
      std::this_thread::sleep_for(1ms);
    }
  });

  struct Outcome {
    Request request;
    RequestResult result;
    std::string streamed;
    bool cancelled = false;
  };
  std::vector<std::vector<Outcome>> outcomes(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c)
    clients.emplace_back([&, c] {
      for (int i = 0; i < kPerClient; ++i) {
        Outcome o;
        o.request = greedy(c, i);
        AsyncEngine::Submit outcome;
        int id = -1;
        auto channel = submit(async, o.request, &outcome, &id);
        ASSERT_TRUE(channel);
        // Every third request is cancelled once its first text arrives.
        o.cancelled = (c + i) % 3 == 0;
        for (;;) {
          auto news = channel->wait(50ms);
          o.streamed += news.text;
          if (o.cancelled && !news.text.empty()) async.cancel(id);
          if (news.finished) break;
        }
        o.result = channel->result();
        outcomes[c].push_back(std::move(o));
      }
    });
  for (auto& t : clients) t.join();
  async.shutdown(true);
  done = true;
  metrics_reader.join();

  int compared = 0;
  for (const auto& per_client : outcomes)
    for (const Outcome& o : per_client) {
      EXPECT_EQ(o.streamed, o.result.text) << finish_reason_name(o.result.finish_reason);
      if (o.result.finish_reason == FinishReason::Cancelled) {
        EXPECT_TRUE(o.cancelled);
        continue;
      }
      EXPECT_EQ(o.result.finish_reason, FinishReason::Length);
      EXPECT_EQ(o.result.tokens, run_alone(*model, o.request));
      ++compared;
    }
  EXPECT_GE(compared, kClients * kPerClient / 2);
  const EngineMetrics m = async.metrics();
  EXPECT_EQ(m.kv.blocks_used, 0);
  EXPECT_EQ(m.running, 0);
  EXPECT_EQ(m.queued, 0);
}

TEST(AsyncEngine, ShutdownCancelsOrDrainsAndThenRefuses) {
  auto model = small_model();
  ThreadPool pool(2);
  for (bool drain : {false, true}) {
    AsyncEngine async(std::make_unique<Engine>(*model, pool, options()), 64);
    std::vector<std::shared_ptr<server::RequestChannel>> channels;
    for (int i = 0; i < 5; ++i) {
      Request r = greedy(9, i);
      r.params.max_tokens = 40;
      AsyncEngine::Submit outcome;
      int id;
      channels.push_back(submit(async, r, &outcome, &id));
      ASSERT_TRUE(channels.back());
    }
    async.shutdown(drain);
    for (auto& ch : channels) {
      ASSERT_TRUE(ch->wait(0ms).finished) << "shutdown returned with a request unfinished";
      const std::string reason = finish_reason_name(ch->result().finish_reason);
      if (drain)
        EXPECT_EQ(reason, "length");
      else
        EXPECT_TRUE(reason == "cancelled" || reason == "length") << reason;
    }
    int id;
    EXPECT_EQ(async.submit(greedy(9, 0), &id), AsyncEngine::Submit::ShuttingDown);
    EXPECT_EQ(async.metrics().kv.blocks_used, 0);
  }
}

TEST(AsyncEngine, AFullQueueIsRefusedAtOnce) {
  auto model = small_model();
  ThreadPool pool(1);
  AsyncEngine async(std::make_unique<Engine>(*model, pool, options()), 2);
  std::vector<std::shared_ptr<server::RequestChannel>> channels;
  int accepted = 0, refused = 0;
  for (int i = 0; i < 12; ++i) {
    Request r = greedy(7, i);
    r.params.max_tokens = 60;
    AsyncEngine::Submit outcome;
    int id;
    auto channel = submit(async, r, &outcome, &id);
    if (channel) {
      ++accepted;
      channels.push_back(channel);
    } else {
      EXPECT_EQ(outcome, AsyncEngine::Submit::QueueFull);
      ++refused;
    }
  }
  // At most max_batch running plus 2 queued could be taken.
  EXPECT_LE(accepted, 3 + 2);
  EXPECT_GE(refused, 12 - 5);
  async.shutdown(true);
  for (auto& ch : channels) EXPECT_EQ(ch->wait(0ms).finished, true);
}
