// Micro benchmarks of a warm epoch's host work per record, on one core, beside what one core
// does to the same bytes with nothing else (memcpy, XXH3): records of 100 KB (fp16, 256x14x14:
// what a ResNet-18 cut after layer3 stores for a 224x224 image; records of 16 KB or more live
// in RocksDB's blob files), 1,500 of them (147 MB) in a store whose block cache (64 MiB) holds
// under half: the reads come from the page cache, as a warm epoch's do. 32 random records a
// call.
//   read_path/memcpy            the records' bytes copied from memory into a batch buffer
//   read_path/xxh3              XXH3-64 of the records' bytes (as record.cc checks a record)
//   read_path/decode_fp16       decode_tensor of records parsed before into a float batch
//   read_path/multi_get         ActivationStore::multi_get alone (1 read thread)
//   read_path/read+check+decode multi_get, parse_record (its XXH3 check), decode_tensor into
//                               the float batch: what CachedBatches does for a contiguous batch
//   read_path/read+check+decode/rocksdb_checksums  the same with RocksDB's checksums verified
//                               too (StoreOptions::verify_read_checksums: the default before)
// Bytes/s count record bytes; the read+check+decode rows add their rate against memcpy's and
// XXH3's of the same records on the same core (vs_memcpy, vs_xxh3), measured just after.
// Run: build/bench/micro/recycle_micro_bench --benchmark_filter=read_path (the tests do not run
// these: they write 147 MB).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "bench/micro/bench_util.h"
#include "cache/activation_store.h"
#include "cache/codec.h"
#include "cache/record.h"
#include "cache/split_writer.h"
#include "recycle/key.h"
#include "recycle/status.h"

namespace {

using recycle::ActivationStore;
using recycle::Key;
using recycle::Status;

constexpr int64_t kNumel = 256 * 14 * 14;  // 100,352 bytes of fp16
constexpr int kRecords = 1500;
constexpr int kPool = 64;  // distinct record contents
constexpr int kBatch = 32;

void check(const Status& st, const char* what) {
  if (!st.ok()) throw std::runtime_error(std::string(what) + ": " + st.to_string());
}

Key key_of(uint64_t i) { return {0xB10B000000000000ULL ^ (i * 0x9E3779B97F4A7C15ULL), i}; }

// The stored records, and the same bytes in memory (kRecords of them, not kPool: the memory
// baselines read 147 MB too, not a pool that stays in the CPU's caches).
struct ReadPath {
  recycle::bench::TempDir dir;  // declared first: removed after the store closes
  std::vector<Key> keys;
  std::vector<std::string> bytes;
  std::vector<recycle::RecordTensor> parsed;  // bytes[i]'s one tensor (a view into it)
  std::unique_ptr<ActivationStore> store;
  std::unique_ptr<ActivationStore> verified;  // the same, read with RocksDB's checksums verified

  ReadPath() {
    std::vector<std::string> pool;
    for (int i = 0; i < kPool; ++i) {
      const auto values = recycle::bench::random_activations(kNumel, 500 + i);
      pool.push_back(recycle::encode_record(recycle::Codec::kFp16,
                                            {{values.data(), {256, 14, 14}}}));
    }
    recycle::StoreOptions o;
    std::unique_ptr<ActivationStore> store_writer;
    check(ActivationStore::open(dir.str(), o, &store_writer), "open");
    {
      recycle::Manifest manifest;
      recycle::SplitWriter writer(store_writer.get(), &manifest, "");  // records only
      for (int start = 0; start < kRecords; start += 100) {
        recycle::StagedWrite w = writer.stage();
        for (int i = start; i < start + 100; ++i) {
          keys.push_back(key_of(static_cast<uint64_t>(i)));
          bytes.push_back(pool[static_cast<size_t>(i % kPool)]);
          w.put_record(keys.back(), bytes.back());
        }
        writer.seal(&w);
        writer.write(&w);
      }
      writer.finish();  // flushes
    }
    store_writer.reset();
    std::vector<recycle::RecordTensor> parts;
    for (const std::string& r : bytes) {
      check(recycle::parse_record(r, &parts), "parse");
      parsed.push_back(parts.at(0));
    }
    o.read_only = true;
    o.read_threads = 1;  // one core
    check(ActivationStore::open(dir.str(), o, &store), "open read-only");
    o.verify_read_checksums = true;
    check(ActivationStore::open(dir.str(), o, &verified), "open read-only, verified");
    std::vector<Status> statuses;
    store->multi_get(keys, [](size_t, std::string_view) {}, &statuses);  // into the page cache
    for (const Status& st : statuses) check(st, "warm-up");
  }
  static ReadPath& get() {
    static ReadPath p;
    return p;
  }
  // kBatch random record numbers.
  void pick(std::mt19937_64* rng, std::vector<int>* out) const {
    std::uniform_int_distribution<int> d(0, kRecords - 1);
    out->resize(kBatch);
    for (int& i : *out) i = d(*rng);
  }
};

// The records `picks` copied one after another into `out`; their bytes.
int64_t copy_records(const ReadPath& p, const std::vector<int>& picks, char* out) {
  int64_t n = 0;
  for (int i : picks) {
    const std::string& r = p.bytes[static_cast<size_t>(i)];
    std::memcpy(out + n, r.data(), r.size());
    n += static_cast<int64_t>(r.size());
  }
  return n;
}

// XXH3-64 of each of the records `picks` into *h (xored); their bytes.
int64_t hash_records(const ReadPath& p, const std::vector<int>& picks, uint64_t* h) {
  int64_t n = 0;
  for (int i : picks) {
    const std::string& r = p.bytes[static_cast<size_t>(i)];
    *h ^= XXH3_64bits(r.data(), r.size());
    n += static_cast<int64_t>(r.size());
  }
  return n;
}

void BM_Memcpy(benchmark::State& state) {
  const ReadPath& p = ReadPath::get();
  std::mt19937_64 rng(1);
  std::vector<int> picks;
  std::vector<char> batch(static_cast<size_t>(kBatch) * p.bytes[0].size());
  int64_t n = 0;
  for (auto _ : state) {
    p.pick(&rng, &picks);
    n += copy_records(p, picks, batch.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(n);
}
BENCHMARK(BM_Memcpy)->Name("read_path/memcpy")->MinTime(0.5);

void BM_Xxh3(benchmark::State& state) {
  const ReadPath& p = ReadPath::get();
  std::mt19937_64 rng(1);
  std::vector<int> picks;
  int64_t n = 0;
  uint64_t h = 0;
  for (auto _ : state) {
    p.pick(&rng, &picks);
    n += hash_records(p, picks, &h);
  }
  benchmark::DoNotOptimize(h);
  state.SetBytesProcessed(n);
}
BENCHMARK(BM_Xxh3)->Name("read_path/xxh3")->MinTime(0.5);

// Bytes a second of memcpy (xxh3 false) or XXH3 over random records on this thread, for 0.3 s:
// the baselines a read path row divides its own rate by, measured right after it.
double baseline_rate(const ReadPath& p, bool xxh3) {
  std::mt19937_64 rng(2);
  std::vector<int> picks;
  std::vector<char> batch(static_cast<size_t>(kBatch) * p.bytes[0].size());
  uint64_t h = 0;
  int64_t n = 0;
  const auto start = std::chrono::steady_clock::now();
  double seconds = 0;
  while (seconds < 0.3) {
    p.pick(&rng, &picks);
    n += xxh3 ? hash_records(p, picks, &h) : copy_records(p, picks, batch.data());
    benchmark::DoNotOptimize(batch.data());
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  benchmark::DoNotOptimize(h);
  return static_cast<double>(n) / seconds;
}

void BM_DecodeFp16(benchmark::State& state) {
  const ReadPath& p = ReadPath::get();
  std::mt19937_64 rng(1);
  std::vector<int> picks;
  std::vector<float> batch(static_cast<size_t>(kBatch * kNumel));
  int64_t n = 0;
  for (auto _ : state) {
    p.pick(&rng, &picks);
    for (int j = 0; j < kBatch; ++j) {
      const size_t i = static_cast<size_t>(picks[j]);
      recycle::decode_tensor(p.parsed[i], batch.data() + j * kNumel);  // parsed at setup
      n += static_cast<int64_t>(p.bytes[i].size());
    }
  }
  benchmark::DoNotOptimize(batch.data());
  state.SetBytesProcessed(n);
}
BENCHMARK(BM_DecodeFp16)->Name("read_path/decode_fp16")->MinTime(0.5);

void BM_MultiGet(benchmark::State& state) {
  ReadPath& p = ReadPath::get();
  std::mt19937_64 rng(1);
  std::vector<int> picks;
  std::vector<Key> keys(kBatch);
  std::vector<Status> statuses;
  int64_t n = 0;
  for (auto _ : state) {
    p.pick(&rng, &picks);
    for (int j = 0; j < kBatch; ++j) keys[j] = p.keys[static_cast<size_t>(picks[j])];
    p.store->multi_get(keys, [&](size_t, std::string_view v) { n += v.size(); }, &statuses);
  }
  for (const Status& st : statuses) check(st, "multi_get");
  state.SetBytesProcessed(n);
}
BENCHMARK(BM_MultiGet)->Name("read_path/multi_get")->MinTime(0.5);

// `verified`: RocksDB's checksums verified too (StoreOptions::verify_read_checksums).
void read_check_decode(benchmark::State& state, bool verified) {
  ReadPath& p = ReadPath::get();
  ActivationStore& store = verified ? *p.verified : *p.store;
  std::mt19937_64 rng(1);
  std::vector<int> picks;
  std::vector<Key> keys(kBatch);
  std::vector<Status> statuses;
  std::vector<recycle::RecordTensor> parts;
  std::vector<float> batch(static_cast<size_t>(kBatch * kNumel));
  int64_t n = 0;
  bool bad = false;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    p.pick(&rng, &picks);
    for (int j = 0; j < kBatch; ++j) keys[j] = p.keys[static_cast<size_t>(picks[j])];
    store.multi_get(
        keys,
        [&](size_t i, std::string_view v) {
          n += static_cast<int64_t>(v.size());
          if (!recycle::parse_record(v, &parts).ok()) {
            bad = true;
            return;
          }
          recycle::decode_tensor(parts[0], batch.data() + static_cast<int64_t>(i) * kNumel);
        },
        &statuses);
  }
  const double rate = static_cast<double>(n) /
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const Status& st : statuses) check(st, "multi_get");
  if (bad) recycle::bench::fail(state, "a record failed to parse");
  benchmark::DoNotOptimize(batch.data());
  state.SetBytesProcessed(n);
  // This row's rate against memcpy's and XXH3's of the same records on this core, just after.
  state.counters["vs_memcpy"] = rate / baseline_rate(p, false);
  state.counters["vs_xxh3"] = rate / baseline_rate(p, true);
}
void BM_ReadCheckDecode(benchmark::State& state) { read_check_decode(state, false); }
BENCHMARK(BM_ReadCheckDecode)->Name("read_path/read+check+decode")->MinTime(0.5);

void BM_ReadCheckDecodeVerified(benchmark::State& state) { read_check_decode(state, true); }
BENCHMARK(BM_ReadCheckDecodeVerified)->Name("read_path/read+check+decode/rocksdb_checksums")
    ->MinTime(0.5);

}  // namespace
