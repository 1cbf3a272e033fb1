// SealedStore (engine/distributed/sealed_store.h) over a real TCPStore on 127.0.0.1: what a
// process without the job token reads there is ciphertext, what it writes no rank accepts (one
// line, no advice to delete anything), and a Gloo group made over the sealed store works.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "engine/distributed/process_group.h"
#include "engine/distributed/sealed_store.h"
#include "tests/tool_runner.h"

namespace {

using recycle::SealedStore;

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

TEST(SealedStore, SealsRoundTripAndRefuseAnotherKeyOrToken) {
  const std::vector<uint8_t> value = bytes("--world-size\t2\n--lr\t0.05\n");
  const auto sealed = recycle::seal("token", "recycle/options/0", value);
  EXPECT_EQ(text(sealed).find("--world-size"), std::string::npos);
  std::vector<uint8_t> out;
  ASSERT_TRUE(recycle::open_sealed("token", "recycle/options/0", sealed, &out));
  EXPECT_EQ(out, value);
  EXPECT_FALSE(recycle::open_sealed("other", "recycle/options/0", sealed, &out));
  EXPECT_FALSE(recycle::open_sealed("token", "recycle/options/1", sealed, &out));
  auto flipped = sealed;
  flipped.back() ^= 1;
  EXPECT_FALSE(recycle::open_sealed("token", "recycle/options/0", flipped, &out));
  EXPECT_FALSE(recycle::open_sealed("token", "recycle/options/0", bytes("ok"), &out));
  // The same value sealed twice differs (a fresh IV each time).
  EXPECT_NE(recycle::seal("token", "k", value), sealed);
  // Empty and long values.
  for (size_t n : {size_t{0}, size_t{19}, size_t{20}, size_t{4097}}) {
    const std::vector<uint8_t> v(n, 'x');
    ASSERT_TRUE(recycle::open_sealed("t", "k", recycle::seal("t", "k", v), &out)) << n;
    EXPECT_EQ(out, v);
  }
}

TEST(SealedStore, AnOutsiderOnTheStoresPortReadsCiphertextAndCannotSteerARank) {
  const int port = recycle::testing::free_tcp_port();
  const auto timeout = std::chrono::milliseconds(5000);
  auto server = recycle::make_tcp_store("127.0.0.1", port, true, "127.0.0.1", AF_INET, timeout);
  auto rank = c10::make_intrusive<SealedStore>(server, "job-token", "127.0.0.1:" +
                                                                       std::to_string(port));
  rank->set("recycle/options/0", bytes("--world-size\t2\n--lr\t0.05\n"));
  EXPECT_EQ(text(rank->get("recycle/options/0")), "--world-size\t2\n--lr\t0.05\n");

  auto outsider = recycle::make_tcp_store("127.0.0.1", port, false, "", AF_INET, timeout);
  const std::string seen = text(outsider->get("recycle/options/0"));
  EXPECT_EQ(seen.find("world-size"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("0.05"), std::string::npos) << seen;
  // A forged verdict, and a sealed value copied under another key: refused in one line.
  for (const auto& [key, value] :
       {std::make_pair(std::string("recycle/verdict"),
                       bytes("forged by an outsider: delete your cache")),
        std::make_pair(std::string("recycle/verdict"), outsider->get("recycle/options/0"))}) {
    outsider->set(key, value);
    try {
      rank->get(key);
      ADD_FAILURE() << "a forged value was accepted";
    } catch (const recycle::ForgedValueError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("was not written by a rank of this job"), std::string::npos) << what;
      EXPECT_EQ(what.find("delete"), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

TEST(SealedStore, AGlooGroupWorksOverIt) {
  const int port = recycle::testing::free_tcp_port();
  const auto timeout = std::chrono::milliseconds(20000);
  auto server = recycle::make_tcp_store("127.0.0.1", port, true, "127.0.0.1", AF_INET, timeout);
  std::vector<std::thread> threads;
  std::vector<float> sums(2, 0);
  std::vector<std::string> errors(2);
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto own = r == 0 ? server
                          : recycle::make_tcp_store("127.0.0.1", port, false, "", AF_INET, timeout);
        auto sealed = c10::make_intrusive<SealedStore>(own, "t", "test");
        auto group =
            recycle::make_gloo_group(sealed, r, 2, std::chrono::seconds(20), "127.0.0.1");
        std::vector<at::Tensor> t{at::full({3}, static_cast<float>(r + 1))};
        group->allreduce(t)->wait();
        sums[r] = t[0][0].item<float>();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(sums[0], 3.0f);
  EXPECT_EQ(sums[1], 3.0f);
}

}  // namespace
