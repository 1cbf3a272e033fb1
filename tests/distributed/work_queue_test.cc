// WorkQueue: how an asynchronous job deals its epochs to workers, and what it does when one is
// lost.
#include "engine/distributed/work_queue.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <stdexcept>
#include <vector>

namespace recycle {
namespace {

TEST(WorkQueue, DealsEveryPositionOfEveryEpochOnceInChunksThatNeverSpanEpochs) {
  WorkQueue q(/*samples_per_epoch=*/10, /*epochs=*/2, /*chunk_samples=*/4);
  EXPECT_EQ(q.chunks_per_epoch(), 3);
  std::map<int64_t, std::vector<int>> seen;  // epoch -> count per position
  int worker = 0;
  while (std::optional<Chunk> c = q.take(worker)) {
    auto& counts = seen[c->epoch];
    counts.resize(10, 0);
    for (int64_t p = c->start; p < c->start + c->count; ++p) ++counts[static_cast<size_t>(p)];
    EXPECT_LE(c->start + c->count, 10);
    q.done(worker, c->id, {1.0 * c->count, c->count});
    worker = 1 - worker;
  }
  ASSERT_EQ(seen.size(), 2u);
  for (const auto& [epoch, counts] : seen) {
    for (int n : counts) EXPECT_EQ(n, 1) << "epoch " << epoch;
  }
  EXPECT_TRUE(q.exhausted());
  EXPECT_TRUE(q.finished());
  const std::vector<EpochTally> epochs = q.epochs();
  ASSERT_EQ(epochs.size(), 2u);
  for (const EpochTally& e : epochs) {
    EXPECT_TRUE(e.complete);
    EXPECT_EQ(e.samples, 10);
    EXPECT_EQ(e.correct, 10);
    EXPECT_DOUBLE_EQ(e.loss_sum, 10.0);
  }
}

TEST(WorkQueue, ALostWorkersUnfinishedChunksGoToTheOthersFirstAndNoneIsCountedTwice) {
  WorkQueue q(12, 2, 3);  // 4 chunks an epoch
  const Chunk a = *q.take(0);
  const Chunk b = *q.take(1);
  const Chunk c = *q.take(1);
  q.done(1, b.id, {});
  EXPECT_EQ(q.lose(1), c.count);  // b was done, c goes back
  EXPECT_EQ(q.lost(), std::set<int>{1});
  EXPECT_FALSE(q.take(1).has_value()) << "a lost worker takes nothing more";
  // The returned chunk comes before the stream's next one.
  const Chunk again = *q.take(0);
  EXPECT_EQ(again.id, c.id);
  // A late report of the lost worker's chunk is refused: it is someone else's now.
  EXPECT_THROW(q.done(1, c.id, {}), std::invalid_argument);
  q.done(0, a.id, {});
  q.done(0, again.id, {});
  while (std::optional<Chunk> next = q.take(0)) q.done(0, next->id, {});
  EXPECT_TRUE(q.finished());
  for (const EpochTally& e : q.epochs()) EXPECT_EQ(e.samples, 12);
}

TEST(WorkQueue, NearTheEndAWorkerHoldingAChunkGetsNoSecondOne) {
  WorkQueue q(/*samples_per_epoch=*/8, /*epochs=*/1, /*chunk_samples=*/2, /*workers=*/2);
  const Chunk a = *q.take(0);
  const Chunk b = *q.take(0);  // 3 undealt: a second one to load ahead
  const Chunk c = *q.take(1);  // 1 undealt now, for 2 workers
  EXPECT_FALSE(q.take(1).has_value()) << "worker 1 holds one; the last goes to whoever is idle";
  EXPECT_FALSE(q.exhausted());
  q.done(0, a.id, {});
  q.done(0, b.id, {});
  const Chunk d = *q.take(0);
  EXPECT_EQ(d.id, 3);
  q.done(1, c.id, {});
  q.done(0, d.id, {});
  EXPECT_TRUE(q.finished());
  // Once worker 1 is lost, worker 0 alone may hold two again.
  WorkQueue r(8, 1, 2, 2);
  r.lose(1);
  EXPECT_TRUE(r.take(0).has_value());
  EXPECT_TRUE(r.take(0).has_value());
  EXPECT_TRUE(r.take(0).has_value());
  EXPECT_TRUE(r.take(0).has_value());
  EXPECT_THROW(WorkQueue(8, 1, 2, 0), std::invalid_argument);
}

TEST(WorkQueue, ExhaustedIsNotFinishedWhileChunksAreHeld) {
  WorkQueue q(4, 1, 4);
  const Chunk only = *q.take(0);
  EXPECT_TRUE(q.exhausted());
  EXPECT_FALSE(q.finished());
  EXPECT_FALSE(q.epochs()[0].complete);
  q.lose(0);
  EXPECT_FALSE(q.exhausted()) << "a lost worker's chunk can be dealt again";
  const Chunk again = *q.take(2);
  EXPECT_EQ(again.id, only.id);
  q.done(2, again.id, {});
  EXPECT_TRUE(q.finished());
}

TEST(WorkQueue, RandomLossesNeverSkipOrRepeatASample) {
  // Property: whatever order workers take, finish and are lost in, each epoch's done samples
  // are its size, once the survivors drain the queue.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 40), epochs = 1 + rng() % 3;
    WorkQueue q(n, static_cast<int64_t>(epochs), 1 + static_cast<int64_t>(rng() % 7),
                /*workers=*/4);
    std::map<int, std::vector<Chunk>> held;
    std::set<int> alive = {0, 1, 2, 3};
    while (!q.finished()) {
      const int w = *std::next(alive.begin(), static_cast<long>(rng() % alive.size()));
      const int action = static_cast<int>(rng() % 10);
      if (action == 0 && w != 0 && alive.size() > 1) {  // worker 0 is never lost
        q.lose(w);
        alive.erase(w);
        held.erase(w);
      } else if (action < 5 || held[w].empty()) {
        if (std::optional<Chunk> c = q.take(w)) held[w].push_back(*c);
      } else {
        q.done(w, held[w].front().id, {0.0, held[w].front().count});
        held[w].erase(held[w].begin());
      }
    }
    for (const EpochTally& e : q.epochs()) {
      EXPECT_EQ(e.samples, n);
      EXPECT_EQ(e.correct, n);
    }
  }
}

TEST(WorkQueue, RefusesAnEmptyJob) {
  EXPECT_THROW(WorkQueue(0, 1, 1), std::invalid_argument);
  EXPECT_THROW(WorkQueue(1, 0, 1), std::invalid_argument);
  EXPECT_THROW(WorkQueue(1, 1, 0), std::invalid_argument);
}

}  // namespace
}  // namespace recycle
