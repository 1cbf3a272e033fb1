// run_reshard (include/recycle/reshard.h): shards of W moved to shards of W' over c10d.
//
//   1. Every rank opens its old shard, when it has one (read-only), and tells the others through
//      the store what it holds: the manifest, its shard, and for every split how many of its
//      samples (and distinct ones) each new shard gets.
//   2. Every rank checks the same descriptions (one job's shards 0..W-1 of one identity, every
//      split complete, max(W, W') ranks) and its own new path; the ranks agree (check_same)
//      before any rank writes or deletes.
//   3. Split by split (in name order), each new shard's cache is opened and begun with the
//      counts every rank announced; the ranks exchange (engine/distributed/message_exchange.h)
//      their entries and records, each record to the rank whose new shard holds its key, once
//      per rank however many splits name it; records are written as they come, the split's
//      index (the entries in the order of their old ranks, each rank's in its order) at the
//      end, and the split marked complete.
//   4. Rank 0 gathers every rank's report.
// The store's keys: recycle/reshard/shard/R (rank R's description, JSON), recycle/reshard/head
// (rank 0's head blob, for new caches), recycle/reshard/report/R (rank R's report), and
// recycle/reshard/final and .../ack/R (rank 0 leaves last).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <unordered_set>

#include "cache/activation_store.h"
#include "cache/cache_dir.h"  // cache_location
#include "cache/open_existing.h"
#include "cache/shard_rule.h"
#include "cache/split_writer.h"
#include "cache/writable_split.h"
#include "engine/distributed/dist_context.h"
#include "engine/distributed/dist_options.h"  // path_for_rank
#include "engine/distributed/message_exchange.h"
#include "recycle/errors.h"
#include "recycle/reshard.h"

namespace recycle {

namespace {

using json = nlohmann::json;

constexpr int kReshardTag = 0x5b01;                 // and 0x5b02 (message_exchange)
constexpr size_t kMessageBytes = size_t{32} << 20;  // records a message, at most (about)
constexpr size_t kEntriesAMessage = size_t{1} << 20;
constexpr size_t kIndexEntriesABatch = 65536;

// What every rank tells the others: whether it has an old shard, its manifest and shard count,
// per split the samples and distinct samples each new shard gets from it, and where its old and
// new directories are (cache_location: equal for one directory of one machine).
struct RankShard {
  bool present = false;
  int64_t index = 0, count = 0;
  std::string from_location, to_location;
  std::string manifest;                                                // Manifest::to_json_string
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> to;  // split -> [t] = {n, unique}
};

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankShard, present, index, count, from_location, to_location,
                                   manifest, to)

// A rank's old shard, open for reading (none for a rank at or above the old count).
struct OldShard {
  std::unique_ptr<ActivationStore> store;
  Manifest manifest;
  std::map<std::string, std::vector<IndexEntry>> index;  // split -> entries, as stored
};

bool holds_files(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::exists(dir, ec) &&
         (!std::filesystem::is_directory(dir, ec) || !std::filesystem::is_empty(dir, ec));
}

// The old shard at `dir`, when there is one, and what it tells the other ranks (`shards`: W').
OldShard open_old(const std::string& dir, int64_t shards, RankShard* told) {
  OldShard old;
  if (!holds_files(dir)) return old;
  old.store = open_cache_for_read(dir, &old.manifest);
  told->present = true;
  told->manifest = old.manifest.to_json_string(-1);
  for (const auto& [name, info] : old.manifest.splits) {
    if (!info.shard.sharded()) {
      throw std::runtime_error("cache " + dir + " holds split " + name +
                               " whole, not a shard: only shards of recycle-build --sharded "
                               "are resharded");
    }
    if (!info.complete) {
      throw std::runtime_error("cache " + dir + ": split " + name +
                               " is incomplete (its build did not finish): rerun the build first");
    }
    if (told->count > 0 && (info.shard.count != told->count || info.shard.index != told->index)) {
      throw std::runtime_error("cache " + dir + " holds " + shard_words(info.shard) + " of split " +
                               name + " and shard " + std::to_string(told->index) + " of " +
                               std::to_string(told->count) + " of another split");
    }
    told->index = info.shard.index;
    told->count = info.shard.count;
    std::vector<IndexEntry>& entries = old.index[name];
    old.store->read_split_index(name, info, &entries).throw_if_error();
    std::vector<std::pair<int64_t, int64_t>> to(static_cast<size_t>(shards));
    std::vector<std::unordered_set<Key, KeyHash>> distinct(static_cast<size_t>(shards));
    for (const IndexEntry& e : entries) {
      const size_t t = static_cast<size_t>(shard_of(e.key, shards));
      ++to[t].first;
      if (distinct[t].insert(e.key).second) ++to[t].second;
    }
    told->to[name] = std::move(to);
  }
  return old;
}

// The checks every rank makes of every rank's description: "" when they pass.
std::string shards_problem(const std::vector<RankShard>& ranks, int64_t shards,
                           const std::string& cache_dir) {
  const int64_t world = static_cast<int64_t>(ranks.size());
  if (!ranks[0].present) return "rank 0 has no shard at " + path_for_rank(cache_dir, 0);
  const int64_t from = ranks[0].count;
  if (from == shards) return "the shards are " + std::to_string(from) + " already";
  if (world != std::max(from, shards)) {
    return "shards of " + std::to_string(from) + " to " + std::to_string(shards) + " need " +
           std::to_string(std::max(from, shards)) + " ranks, not " + std::to_string(world);
  }
  Manifest first;
  Manifest::from_json_string(ranks[0].manifest, &first).throw_if_error();
  for (int64_t r = 0; r < world; ++r) {
    const RankShard& s = ranks[static_cast<size_t>(r)];
    const std::string where =
        "rank " + std::to_string(r) + " (" + path_for_rank(cache_dir, r) + ")";
    if (r >= from) {
      if (s.present) return where + " holds a cache, but the shards are " + std::to_string(from);
      continue;
    }
    if (!s.present) return where + " has no shard: the shards are " + std::to_string(from);
    if (s.count != from || s.index != r) {
      return where + " holds shard " + std::to_string(s.index) + " of " + std::to_string(s.count) +
             ", rank 0 shard 0 of " + std::to_string(from) + ": not the shards of one build";
    }
    Manifest m;
    Manifest::from_json_string(s.manifest, &m).throw_if_error();
    const std::vector<std::string> d = m.identity_differences(first.identity());
    if (!d.empty()) return where + " holds another cache than rank 0's: " + d[0];
    if (m.splits.size() != first.splits.size() || m.class_names != first.class_names) {
      return where + " holds other splits or classes than rank 0's";
    }
    for (const auto& [name, info] : first.splits) {
      const auto it = m.splits.find(name);
      if (it == m.splits.end() || it->second.data != info.data || it->second.views != info.views ||
          it->second.augment != info.augment ||
          it->second.shard.split_samples != info.shard.split_samples) {
        return where + " holds split " + name + " of other data than rank 0's";
      }
    }
  }
  return "";
}

// Every new shard in a directory of its own, none of them an old shard's or inside one (a path
// that names the old one another way: a link, "x/../c"). "" when so.
std::string directories_problem(const std::vector<RankShard>& ranks, int64_t shards,
                                const std::string& to) {
  for (size_t a = 0; a < ranks.size() && static_cast<int64_t>(a) < shards; ++a) {
    const std::string& mine = ranks[a].to_location;
    for (size_t b = 0; b < ranks.size(); ++b) {
      const std::string& old = ranks[b].from_location;
      if (ranks[b].present && mine.compare(0, old.size(), old) == 0) {
        return "rank " + std::to_string(a) + "'s --to (" + path_for_rank(to, static_cast<int>(a)) +
               ") is rank " + std::to_string(b) + "'s old shard or inside it: give another --to";
      }
      if (b > a && static_cast<int64_t>(b) < shards && mine == ranks[b].to_location) {
        return "ranks " + std::to_string(a) + " and " + std::to_string(b) +
               " were given one --to directory: every rank writes its own new shard (put {rank} "
               "in --to on a machine of several ranks)";
      }
    }
  }
  return "";
}

// This rank's new path checked: nothing there, or (rebuild) a cache to replace. "" when fine.
std::string new_path_problem(const std::string& dir, bool rebuild) {
  if (!holds_files(dir)) return "";
  if (!rebuild)
    return dir +
           " holds files already: give another --to, or --rebuild to replace "
           "the cache there";
  // What --rebuild's delete will check, checked before every rank agrees.
  const Status may_delete = ActivationStore::check_destroy(dir);
  return may_delete.ok() ? "" : may_delete.to_string();
}

std::vector<RankShard> tell_each_other(DistContext& ctx, const RankShard& mine) {
  const std::string text = json(mine).dump();
  ctx.store().set("recycle/reshard/shard/" + std::to_string(ctx.rank()),
                  std::vector<uint8_t>(text.begin(), text.end()));
  std::vector<RankShard> all;
  for (int r = 0; r < ctx.world(); ++r) {
    const std::vector<uint8_t> v = ctx.store().get("recycle/reshard/shard/" + std::to_string(r));
    all.push_back(json::parse(std::string(v.begin(), v.end())).get<RankShard>());
  }
  return all;
}

void put_u64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }
uint64_t get_u64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// One split's exchange on one rank: what it sends (from its old shard) and what it writes (into
// its new shard).
class SplitExchange {
 public:
  SplitExchange(int rank, int world, int64_t shards, const ActivationStore* old,
                const std::vector<IndexEntry>* entries, const SplitInfo* info,
                std::vector<std::unordered_set<Key, KeyHash>>* sent, ReshardReport* report)
      : rank_(rank),
        old_(old),
        report_(report),
        out_(static_cast<size_t>(world)),
        in_(static_cast<size_t>(world)) {
    if (entries == nullptr) return;
    for (const IndexEntry& e : *entries) {
      const size_t t = static_cast<size_t>(shard_of(e.key, shards));
      out_[t].entries.push_back(e);
      for (const Key& k : info->record_keys(e.key)) {
        if ((*sent)[t].insert(k).second) out_[t].records.push_back(k);
      }
    }
  }

  void set_writer(SplitWriter* writer) { writer_ = writer; }

  bool next(int to, std::string* message) {
    Outgoing& o = out_[static_cast<size_t>(to)];
    message->clear();
    if (o.entry < o.entries.size()) {
      message->push_back('E');
      const size_t end = std::min(o.entries.size(), o.entry + kEntriesAMessage);
      for (; o.entry < end; ++o.entry) {
        char key[Key::kBytes];
        o.entries[o.entry].key.to_bytes(key);
        message->append(key, Key::kBytes);
        put_u64(message, static_cast<uint64_t>(o.entries[o.entry].label));
      }
      return true;
    }
    if (o.record < o.records.size()) {
      pack_records(&o, to, message);
      return true;
    }
    return false;
  }

  void on(int from, std::string message) {
    if (message.empty())
      throw std::runtime_error("an empty message from rank " + std::to_string(from));
    if (message[0] == 'E') {
      for (size_t p = 1; p + Key::kBytes + 8 <= message.size(); p += Key::kBytes + 8) {
        IndexEntry e;
        Key::from_bytes(std::string_view(message).substr(p, Key::kBytes), &e.key);
        e.label = static_cast<int64_t>(get_u64(message.data() + p + Key::kBytes));
        in_[static_cast<size_t>(from)].push_back(e);
      }
      return;
    }
    if (message[0] != 'R') {
      throw std::runtime_error("a message of unknown kind from rank " + std::to_string(from));
    }
    write_records(from, message);
  }

  // The split's index: every rank's entries, rank by rank, each in its order.
  void write_index() {
    int64_t position = 0;
    StagedWrite w = writer_->stage();
    for (const std::vector<IndexEntry>& from : in_) {
      for (const IndexEntry& e : from) {
        w.put_index(position++, e);
        if (w.entries >= static_cast<int64_t>(kIndexEntriesABatch)) {
          writer_->seal(&w);
          writer_->write(&w);
          w = writer_->stage();
        }
      }
    }
    writer_->seal(&w);
    writer_->write(&w);
    report_->samples += position;
  }

 private:
  struct Outgoing {
    std::vector<IndexEntry> entries;
    std::vector<Key> records;
    size_t entry = 0, record = 0;
  };

  void pack_records(Outgoing* o, int to, std::string* message) {
    size_t n = 0, bytes = 0;
    std::string heads, bodies;
    while (o->record < o->records.size() && bytes < kMessageBytes) {
      const size_t take = std::min<size_t>(256, o->records.size() - o->record);
      const Key* keys = o->records.data() + o->record;
      std::vector<Status> statuses;
      old_->multi_get(
          keys, take,
          [&](size_t i, std::string_view v) {
            char key[Key::kBytes];
            keys[i].to_bytes(key);
            heads.append(key, Key::kBytes);
            put_u64(&heads, v.size());
            bodies.append(v.data(), v.size());
            bytes += v.size();
          },
          &statuses);
      for (const Status& st : statuses) {
        if (!st.ok()) {
          throw std::runtime_error("cache " + old_->dir() + ": a record its index names: " +
                                   st.to_string() + " (run recycle-inspect --verify)");
        }
      }
      o->record += take;
      n += take;
    }
    message->push_back('R');
    put_u64(message, n);
    *message += heads;
    *message += bodies;
    if (to != rank_) {
      report_->records_sent += static_cast<int64_t>(n);
      report_->bytes_sent += static_cast<int64_t>(bytes);
    }
  }

  void write_records(int from, const std::string& message) {
    if (writer_ == nullptr) throw std::runtime_error("records for a rank with no new shard");
    const auto malformed = [&] {
      return std::runtime_error("a malformed message of records from rank " + std::to_string(from));
    };
    if (message.size() < 9) throw malformed();
    const uint64_t n = get_u64(message.data() + 1);
    if (n > (message.size() - 9) / (Key::kBytes + 8)) throw malformed();
    const char* head = message.data() + 9;
    const char* body = head + n * (Key::kBytes + 8);
    const char* end = message.data() + message.size();
    StagedWrite w = writer_->stage();
    for (uint64_t i = 0; i < n; ++i, head += Key::kBytes + 8) {
      Key key;
      Key::from_bytes(std::string_view(head, Key::kBytes), &key);
      const uint64_t size = get_u64(head + Key::kBytes);
      if (size > static_cast<uint64_t>(end - body)) throw malformed();
      w.put_record(key, std::string_view(body, size));
      body += size;
      if (from == rank_) {
        ++report_->records_kept;
      } else {
        ++report_->records_received;
        report_->bytes_received += static_cast<int64_t>(size);
      }
    }
    writer_->seal(&w);
    writer_->write(&w);
  }

  int rank_;
  const ActivationStore* old_;
  ReshardReport* report_;
  SplitWriter* writer_ = nullptr;
  std::vector<Outgoing> out_;
  std::vector<std::vector<IndexEntry>> in_;
};

// The new shard's split begun: its counts those the ranks announced.
SplitInfo new_split_info(const SplitInfo& old, const std::vector<RankShard>& ranks,
                         const std::string& split, int rank, int64_t shards) {
  SplitInfo info = old;
  info.samples = 0;
  info.unique = 0;
  info.complete = false;
  for (const RankShard& s : ranks) {
    if (!s.present) continue;
    info.samples += s.to.at(split)[static_cast<size_t>(rank)].first;
    info.unique += s.to.at(split)[static_cast<size_t>(rank)].second;
  }
  info.shard = split_shard(SplitShard{int64_t{rank}, shards, "", 0}, old.shard.split_samples);
  return info;
}

ReshardReport report_of(const json& j) {
  ReshardReport r;
  r.rank = j.value("rank", 0);
  r.shards_from = j.value("shards_from", 0);
  r.shards_to = j.value("shards_to", 0);
  r.samples = j.value("samples", int64_t{0});
  r.records_kept = j.value("records_kept", int64_t{0});
  r.records_sent = j.value("records_sent", int64_t{0});
  r.records_received = j.value("records_received", int64_t{0});
  r.bytes_sent = j.value("bytes_sent", int64_t{0});
  r.bytes_received = j.value("bytes_received", int64_t{0});
  r.seconds = j.value("seconds", 0.0);
  r.move_seconds = j.value("move_seconds", 0.0);
  return r;
}

// The head blob a new cache starts with (a cache's initial head, "" for none): rank 0's, sent
// through the store to every rank (a rank without an old shard has none of its own).
std::string head_of_rank_0(DistContext& ctx, const OldShard& old) {
  const std::string key = "recycle/reshard/head";
  if (ctx.rank() == 0) {
    std::string h;
    if (!old.store->get_blob("head", &h).ok()) h.clear();
    ctx.store().set(key, std::vector<uint8_t>(h.begin(), h.end()));
    return h;
  }
  const std::vector<uint8_t> v = ctx.store().get(key);
  return std::string(v.begin(), v.end());
}

// Every split moved, in name order; `base`: the manifest the new shard starts from.
void move_splits(DistContext& ctx, const ReshardOptions& o, const OldShard& old,
                 const std::vector<RankShard>& ranks, Manifest base, ReshardReport* report) {
  const int rank = ctx.rank();
  const bool writes = rank < o.shards;
  const std::string head = head_of_rank_0(ctx, old);
  std::vector<std::unordered_set<Key, KeyHash>> sent(static_cast<size_t>(ctx.world()));
  bool first = true;
  for (const auto& [name, old_info] : base.splits) {
    const auto mine = old.index.find(name);
    SplitExchange x(rank, ctx.world(), o.shards, old.store.get(),
                    mine == old.index.end() ? nullptr : &mine->second, &old_info, &sent, report);
    std::unique_ptr<WritableSplit> split;
    if (writes) {
      split = std::make_unique<WritableSplit>(WritableSplit::Options{
          path_for_rank(o.to, rank), name, Compression::kNone, o.rebuild && first});
      Manifest m = split->stored() ? *split->stored() : base;
      if (!split->stored()) {
        m.splits.clear();
        m.records = 0;
        m.record_bytes = 0;
      }
      split->start(m, split->stored() ? "" : head);
      split->begin(new_split_info(old_info, ranks, name, rank, o.shards));
      x.set_writer(&split->writer());
    }
    exchange_messages(
        ctx.group(), kReshardTag, [&](int to, std::string* m) { return x.next(to, m); },
        [&](int from, std::string m) { x.on(from, std::move(m)); });
    if (writes) {
      x.write_index();
      split->finish({});
    }
    first = false;
  }
}

}  // namespace

std::string ReshardReport::to_json() const {
  json j = {{"rank", rank},
            {"shards_from", shards_from},
            {"shards_to", shards_to},
            {"samples", samples},
            {"records_kept", records_kept},
            {"records_sent", records_sent},
            {"records_received", records_received},
            {"bytes_sent", bytes_sent},
            {"bytes_received", bytes_received},
            {"computed", computed},
            {"seconds", seconds},
            {"move_seconds", move_seconds}};
  if (!per_rank.empty()) {
    j["per_rank"] = json::array();
    for (const ReshardReport& r : per_rank) j["per_rank"].push_back(json::parse(r.to_json()));
  }
  return j.dump();
}

ReshardReport run_reshard(const ReshardOptions& o) {
  o.validate();
  const auto start = std::chrono::steady_clock::now();
  DistContext ctx(o.dist);
  ctx.check_same("--shards", std::to_string(o.shards));
  ReshardReport report;
  report.rank = ctx.rank();
  RankShard mine;
  std::string problem;
  OldShard old;
  try {
    old = open_old(path_for_rank(o.cache_dir, ctx.rank()), o.shards, &mine);
  } catch (const std::exception& e) {
    problem = e.what();
    mine = RankShard();
  }
  mine.from_location = cache_location(path_for_rank(o.cache_dir, ctx.rank()));
  mine.to_location = cache_location(path_for_rank(o.to, ctx.rank()));
  const std::vector<RankShard> ranks = tell_each_other(ctx, mine);
  if (problem.empty()) problem = shards_problem(ranks, o.shards, o.cache_dir);
  if (problem.empty()) problem = directories_problem(ranks, o.shards, o.to);
  if (problem.empty() && ctx.rank() < o.shards) {
    problem = new_path_problem(path_for_rank(o.to, ctx.rank()), o.rebuild);
  }
  ctx.check_same("reshard checks", problem.empty() ? "ok" : problem);
  if (!problem.empty()) throw std::runtime_error(problem);  // the same on every rank
  report.shards_from = static_cast<int>(ranks[0].count);
  report.shards_to = static_cast<int>(o.shards);
  Manifest base;
  Manifest::from_json_string(ranks[0].manifest, &base).throw_if_error();
  const auto moving = std::chrono::steady_clock::now();
  move_splits(ctx, o, old, ranks, std::move(base), &report);
  report.move_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - moving).count();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string text = report.to_json();
  ctx.store().set("recycle/reshard/report/" + std::to_string(ctx.rank()),
                  std::vector<uint8_t>(text.begin(), text.end()));
  // Rank 0 (whose process may host the store) leaves last: every other rank acknowledges that
  // it has seen rank 0's word before rank 0 returns.
  const std::vector<uint8_t> done = {'1'};
  if (ctx.rank() != 0) {
    ctx.store().get("recycle/reshard/final");
    ctx.store().set("recycle/reshard/ack/" + std::to_string(ctx.rank()), done);
    return report;
  }
  for (int r = 0; r < ctx.world(); ++r) {
    const std::vector<uint8_t> v = ctx.store().get("recycle/reshard/report/" + std::to_string(r));
    report.per_rank.push_back(report_of(json::parse(std::string(v.begin(), v.end()))));
  }
  ctx.store().set("recycle/reshard/final", done);
  for (int r = 1; r < ctx.world(); ++r) ctx.store().get("recycle/reshard/ack/" + std::to_string(r));
  return report;
}

}  // namespace recycle
