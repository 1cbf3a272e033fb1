#include "engine/jobs/checkpoint.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "base/strings.h"
#include "engine/data/regular_file.h"
#include "recycle/content_hasher.h"
#include "recycle/options.h"

namespace recycle {

namespace {

constexpr const char* kCheckpointEntry = "recycle.checkpoint";
constexpr const char* kOptimizerEntry = "optimizer";

// "FLAG VALUE" lines into flag -> value.
std::map<std::string, std::string> job_lines(const std::string& job) {
  std::map<std::string, std::string> lines;
  std::istringstream in(job);
  std::string line;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    lines[line.substr(0, space)] = space == std::string::npos ? "" : line.substr(space + 1);
  }
  return lines;
}

std::string shown(const std::string& value) { return value.empty() ? "none" : value; }

}  // namespace

std::string checkpoint_job(const TrainOptions& o, int world) {
  std::string job;
  for (const FlagValue& f : o.flag_values()) {
    if (f.same_on_every_rank && f.flag != "--world-size") job += f.flag + " " + f.value + "\n";
  }
  return job + "world " + std::to_string(world) + "\n";
}

void save_checkpoint(const std::string& path, BlockStack& head, const HeadIdentity& identity,
                     const torch::optim::Optimizer& optimizer, const std::string& job,
                     int64_t epochs_done) {
  const nlohmann::json meta = {{"epochs_done", epochs_done}, {"job", job}};
  save_head(head, identity, path, [&](torch::serialize::OutputArchive& archive) {
    archive.write(kCheckpointEntry, c10::IValue(meta.dump()));
    torch::serialize::OutputArchive state;
    optimizer.save(state);
    archive.write(kOptimizerEntry, state);
  });
}

std::string checkpoint_digest(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return kNoCheckpoint;
  try {
    return hash128(read_regular_file(path)).to_hex();
  } catch (const std::runtime_error& e) {
    // Every rank compares digests before any loads the file: a rank that cannot read it shows
    // as a difference there, and the load names the reason.
    return std::string("unreadable (") + e.what() + ")";
  }
}

int64_t load_checkpoint(const std::string& path, const std::string& job, const Manifest& cache,
                        BlockStack& head, torch::optim::Optimizer& optimizer) {
  const std::string where = "--checkpoint " + path;
  std::unique_ptr<HeadFile> read;
  try {
    read = std::make_unique<HeadFile>(path);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(where + " is not a checkpoint recycle-train can read (" + e.what() +
                             ")");
  }
  HeadFile& file = *read;
  c10::IValue value;
  if (!file.archive().try_read(kCheckpointEntry, value) || !value.isString()) {
    throw std::runtime_error(where + " is a head file, not a checkpoint (move it away, or give "
                                     "another path)");
  }
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(value.toStringRef());
    meta.at("epochs_done").get<int64_t>();
    meta.at("job").get<std::string>();
  } catch (const nlohmann::json::exception&) {
    throw std::runtime_error(where + " has a damaged checkpoint entry");
  }
  // The same job: every shared option, the world, and the cache the head was trained on.
  const std::map<std::string, std::string> was = job_lines(meta["job"]), is = job_lines(job);
  std::vector<std::string> diffs;
  for (const auto& [flag, value] : is) {
    const auto it = was.find(flag);
    const std::string before = it == was.end() ? "(not set)" : shown(it->second);
    if (before != shown(value)) {
      diffs.push_back(flag + ": " + before + " in the checkpoint, " + shown(value) +
                      " in this run");
    }
  }
  for (const std::string& d : head_differences(file.identity(), cache)) diffs.push_back(d);
  if (!diffs.empty()) {
    throw std::runtime_error(where + " was written by another job (" + join(diffs, "; ") +
                             "): give another path, or the same options");
  }
  file.load_into(head);
  try {
    torch::serialize::InputArchive state;
    file.archive().read(kOptimizerEntry, state);
    optimizer.load(state);
  } catch (const c10::Error& e) {
    throw std::runtime_error(where + ": its optimizer state does not fit this run's optimizer");
  }
  return meta["epochs_done"].get<int64_t>();
}

}  // namespace recycle
