#include "engine/data/spam_assassin.h"

#include <xxhash.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "engine/data/mail_text.h"
#include "engine/data/tsv_reader.h"

namespace recycle {
namespace {

namespace fs = std::filesystem;

struct Line {
  uint64_t order = 0;
  std::string label;
  std::string text;
};

std::string read_whole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error(path.string() + ": read error");
  return bytes;
}

// The message's numeric id; throws naming the file.
int64_t parse_id(const std::string& id, const fs::path& file) {
  if (id.empty() || id.size() > 12 ||
      !std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    throw std::runtime_error(file.string() + ": id '" + id + "' is not a decimal number");
  }
  return std::stoll(id);
}

std::string string_field(const nlohmann::json& j, const char* name, const fs::path& file) {
  const auto it = j.find(name);
  if (it == j.end() || !it->is_string()) {
    throw std::runtime_error(file.string() + ": no string field '" + name + "'");
  }
  return it->get<std::string>();
}

// Reads one group folder into train and test lines.
void read_group(const fs::path& dir, const SpamAssassinGroup& group, const SpamAssassinOptions& o,
                std::vector<Line>* train, std::vector<Line>* test) {
  if (!fs::is_directory(dir)) {
    throw std::runtime_error(dir.string() + ": no such folder (is this the corpus' data folder?)");
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  if (o.check_counts && static_cast<int64_t>(files.size()) != group.messages) {
    throw std::runtime_error(dir.string() + ": " + std::to_string(files.size()) +
                             " messages, the corpus holds " + std::to_string(group.messages));
  }
  for (const fs::path& file : files) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_whole(file));
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(file.string() + ": not JSON (" + e.what() + ")");
    }
    if (!j.is_object()) throw std::runtime_error(file.string() + ": not a JSON object");
    const std::string id = string_field(j, "id", file);
    const std::string group_name = string_field(j, "group", file);
    const std::string text = string_field(j, "text", file);
    if (group_name != group.name) {
      throw std::runtime_error(file.string() + ": group '" + group_name + "' in folder " +
                               group.name);
    }
    if (!is_valid_utf8(text)) throw std::runtime_error(file.string() + ": text is not UTF-8");
    const int64_t number = parse_id(id, file);
    const std::string where = group.name + "/" + id;
    Line line{XXH3_64bits(where.data(), where.size()), group.label,
              mail_to_text(text, o.max_text_bytes)};
    (number % 5 == 0 ? test : train)->push_back(std::move(line));
  }
}

TsvFileCount write_lines(std::vector<Line> lines, const fs::path& path) {
  std::sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) {
    return a.order != b.order ? a.order < b.order : a.text < b.text;
  });
  TsvFileCount count;
  count.path = path.string();
  std::map<std::string, int64_t> per_label;
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    for (const Line& line : lines) {
      out << line.label << '\t' << line.text << '\n';
      ++per_label[line.label];
    }
    out.flush();
    if (!out) throw std::runtime_error(tmp.string() + ": cannot write");
  }
  fs::rename(tmp, path);
  count.samples = static_cast<int64_t>(lines.size());
  count.per_label.assign(per_label.begin(), per_label.end());
  return count;
}

}  // namespace

const std::vector<SpamAssassinGroup>& spam_assassin_groups() {
  static const std::vector<SpamAssassinGroup> groups = {
      {"easy-ham-1", "pretrain", "easy-ham", 2500}, {"hard-ham-1", "pretrain", "hard-ham", 250},
      {"spam-1", "pretrain", "spam", 500},          {"easy-ham-2", "finetune", "ham", 1400},
      {"spam-2", "finetune", "spam", 1396}};
  return groups;
}

std::vector<TsvFileCount> write_spam_assassin_task(const std::string& data_dir,
                                                   const std::string& out_dir,
                                                   const SpamAssassinOptions& options) {
  if (options.max_text_bytes == 0) throw std::invalid_argument("max_text_bytes must be at least 1");
  // Everything is read before anything is written, so a corpus that fails a check replaces
  // none of the files.
  struct Split {
    fs::path dir;
    std::vector<Line> train, test;
  };
  std::vector<Split> splits;
  for (const std::string task : {"pretrain", "finetune"}) {
    Split split;
    split.dir = fs::path(out_dir) / task;
    for (const SpamAssassinGroup& group : spam_assassin_groups()) {
      if (group.task != task) continue;
      read_group(fs::path(data_dir) / group.name, group, options, &split.train, &split.test);
    }
    splits.push_back(std::move(split));
  }
  std::vector<TsvFileCount> counts;
  for (Split& split : splits) {
    std::error_code ec;
    fs::create_directories(split.dir, ec);
    if (ec) throw std::runtime_error(split.dir.string() + ": cannot create (" + ec.message() + ")");
    counts.push_back(write_lines(std::move(split.train), split.dir / "train.tsv"));
    counts.push_back(write_lines(std::move(split.test), split.dir / "test.tsv"));
  }
  return counts;
}

}  // namespace recycle
