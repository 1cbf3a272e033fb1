// exchange_messages over a real in-process Gloo group: every rank's messages reach every rank
// (itself included) whole and in order, whatever their number and size, an empty stream too.
#include "engine/distributed/message_exchange.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/distributed/gloo_group.h"

namespace {

// The messages rank `from` sends rank `to`: (from + 2 * to) % 4 of them, the k-th of
// 1000 * k * (from + 1) bytes (up to 3 MB), each byte naming from, to and k.
std::vector<std::string> messages(int from, int to) {
  std::vector<std::string> out;
  for (int k = 0; k < (from + 2 * to) % 4; ++k) {
    std::string m(static_cast<size_t>(1000 * k * (from + 1) * (k == 2 ? 500 : 1)), '\0');
    for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<char>(from * 31 + to * 7 + k + i);
    out.push_back(m);
  }
  return out;
}

TEST(MessageExchange, EveryRanksMessagesReachEveryRankWholeAndInOrder) {
  for (int world : {2, 3}) {
    std::mutex mu;
    std::map<std::pair<int, int>, std::vector<std::string>> got;  // (from, to) -> messages
    recycle::testing::run_gloo_group(world, [&](int rank, auto group) {
      std::vector<size_t> next(static_cast<size_t>(world), 0);
      recycle::exchange_messages(
          group, 0x7100,
          [&](int to, std::string* m) {
            const std::vector<std::string> all = messages(rank, to);
            if (next[static_cast<size_t>(to)] == all.size()) return false;
            *m = all[next[static_cast<size_t>(to)]++];
            return true;
          },
          [&](int from, std::string m) {
            std::lock_guard<std::mutex> lock(mu);
            got[{from, rank}].push_back(std::move(m));
          });
    });
    for (int from = 0; from < world; ++from) {
      for (int to = 0; to < world; ++to) {
        const std::vector<std::string> want = messages(from, to);
        const auto it = got.find({from, to});
        EXPECT_EQ(it == got.end() ? std::vector<std::string>{} : it->second, want)
            << world << " ranks, from " << from << " to " << to;
      }
    }
  }
}

}  // namespace
