#include "keyers/view_key.h"

#include "recycle/content_hasher.h"

namespace recycle {

Key view_key(const Key& content, std::string_view augment_spec, int64_t view) {
  ContentHasher h;
  h.update_field("recycle-view");
  char bytes[Key::kBytes];
  content.to_bytes(bytes);
  h.update_field(std::string_view(bytes, Key::kBytes));
  h.update_field(augment_spec);
  h.update_u64(static_cast<uint64_t>(view));
  return h.digest();
}

}  // namespace recycle
