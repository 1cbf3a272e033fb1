// libFuzzer harness for recycle::Manifest JSON (cache/manifest.h).
//
// from_json_string on the input must return a Status (OK, Corruption or Mismatch) and never
// throw or crash. When it is OK, to_json_string and from_json_string again must give back an
// OK manifest equal to the first: the same identity (identity_differences empty both ways,
// the same digest), the same splits, and the same contents fields. An OK manifest's layout (read from
// "record_layout", or derived from record_shapes and codec in a manifest from before layouts)
// is valid, agrees with record_shapes, and survives the round trip.
#include <cstdint>
#include <string>
#include <typeinfo>

#include "cache/manifest.h"
#include "fuzz/fuzz_util.h"

namespace {

using recycle::Manifest;
using recycle::fuzz::fail;

Manifest parse(const std::string& text, recycle::Status* st) {
  Manifest m;
  try {
    *st = Manifest::from_json_string(text, &m);
  } catch (const std::exception& e) {
    fail(std::string("from_json_string threw ") + typeid(e).name() + ": " + e.what());
  } catch (...) {
    fail("from_json_string threw a non-std exception");
  }
  return m;
}

bool same_splits(const Manifest& a, const Manifest& b) {
  if (a.splits.size() != b.splits.size()) return false;
  for (const auto& [name, s] : a.splits) {
    auto it = b.splits.find(name);
    if (it == b.splits.end()) return false;
    const recycle::SplitInfo& t = it->second;
    if (s.data != t.data || s.samples != t.samples || s.unique != t.unique ||
        s.complete != t.complete) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  recycle::Status st;
  const Manifest m = parse(text, &st);
  if (!st.ok()) {
    FUZZ_CHECK(st.is_corruption() || st.is_mismatch(), "unexpected status " + st.to_string());
    return 0;
  }
  FUZZ_CHECK(m.prefix_blocks >= 0 && m.prefix_blocks <= m.total_blocks,
             "an impossible split point was accepted");
  const recycle::RecordLayout layout = m.layout();
  FUZZ_CHECK(recycle::check_layout(layout).ok(), "an invalid record layout was accepted");
  FUZZ_CHECK(recycle::layout_shapes(layout) == m.record_shapes,
             "record_shapes disagree with the layout");
  const double r = m.recycle_ratio();
  FUZZ_CHECK(r >= 0.0 && r <= 1.0, "recycle_ratio out of [0, 1]");

  std::string json;
  for (int indent : {2, -1}) {
    try {
      json = m.to_json_string(indent);
    } catch (const std::exception& e) {
      fail(std::string("to_json_string threw ") + typeid(e).name() + ": " + e.what());
    }
    recycle::Status st2;
    const Manifest again = parse(json, &st2);
    FUZZ_CHECK(st2.ok(), "re-parse of to_json_string output: " + st2.to_string() + "\n" + json);
    const auto diff = m.identity_differences(again);
    FUZZ_CHECK(diff.empty(), "identity changed: " + diff.front());
    FUZZ_CHECK(again.identity_differences(m).empty(), "identity changed (reverse)");
    FUZZ_CHECK(again.identity().digest() == m.identity().digest(), "identity digest changed");
    FUZZ_CHECK(same_splits(m, again), "splits changed\n" + json);
    FUZZ_CHECK(again.record_layout == m.record_layout, "record layout changed\n" + json);
    FUZZ_CHECK(m.record_shapes == again.record_shapes && m.input_shape == again.input_shape && m.class_names == again.class_names &&
                   m.classifier == again.classifier && m.records == again.records &&
                   m.record_bytes == again.record_bytes,
               "contents changed\n" + json);
    FUZZ_CHECK(m.to_json_string(indent) == again.to_json_string(indent),
               "to_json_string is not a fixed point");
  }
  return 0;
}
