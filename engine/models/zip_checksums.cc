#include "engine/models/zip_checksums.h"

#include <zlib.h>

#include <cstdint>
#include <stdexcept>

#include "engine/data/regular_file.h"

namespace recycle {

namespace {

constexpr uint32_t kEndOfCentralDirectory = 0x06054b50;
constexpr uint32_t kCentralEntry = 0x02014b50;
constexpr uint32_t kLocalHeader = 0x04034b50;

uint32_t u16(const std::string& b, size_t at) {
  return static_cast<uint8_t>(b[at]) | static_cast<uint32_t>(static_cast<uint8_t>(b[at + 1])) << 8;
}
uint32_t u32(const std::string& b, size_t at) { return u16(b, at) | u16(b, at + 2) << 16; }

}  // namespace

void verify_zip_checksums(const std::string& path) {
  const std::string b = read_regular_file(path);
  auto broken = [&](const std::string& why) {
    return std::runtime_error(path + " is damaged: " + why);
  };
  // The end-of-central-directory record: the last 22 bytes plus a comment of up to 64 KiB.
  if (b.size() < 22) throw broken("too short for a zip file");
  size_t eocd = std::string::npos;
  const size_t lowest = b.size() > 22 + 65535 ? b.size() - 22 - 65535 : 0;
  for (size_t at = b.size() - 22 + 1; at-- > lowest;) {
    if (u32(b, at) == kEndOfCentralDirectory) {
      eocd = at;
      break;
    }
  }
  if (eocd == std::string::npos) throw broken("no zip directory at its end");
  const uint32_t entries = u16(b, eocd + 10);
  const uint32_t dir_size = u32(b, eocd + 12), dir_offset = u32(b, eocd + 16);
  if (entries == 0xFFFF || dir_offset == 0xFFFFFFFF) return;  // zip64: not checked
  if (static_cast<uint64_t>(dir_offset) + dir_size > eocd) {
    throw broken("zip directory out of range");
  }
  size_t at = dir_offset;
  for (uint32_t i = 0; i < entries; ++i) {
    if (at + 46 > eocd || u32(b, at) != kCentralEntry) throw broken("bad zip directory entry");
    const uint32_t method = u16(b, at + 10), crc = u32(b, at + 16);
    const uint32_t size = u32(b, at + 20), name_len = u16(b, at + 28);
    const uint32_t extra_len = u16(b, at + 30), comment_len = u16(b, at + 32);
    const uint32_t local = u32(b, at + 42);
    if (at + 46 + name_len > eocd) throw broken("bad zip directory entry");
    const std::string name = b.substr(at + 46, name_len);
    at += 46 + name_len + extra_len + comment_len;
    if (method != 0) continue;  // compressed: not checked
    if (static_cast<uint64_t>(local) + 30 > b.size() || u32(b, local) != kLocalHeader) {
      throw broken("entry " + name + " has no local header");
    }
    const uint64_t data =
        static_cast<uint64_t>(local) + 30 + u16(b, local + 26) + u16(b, local + 28);
    if (data + size > b.size()) throw broken("entry " + name + " runs past the end of the file");
    const uLong got = crc32(crc32(0L, Z_NULL, 0),
                            reinterpret_cast<const Bytef*>(b.data() + data), size);
    if (got != crc) throw broken("entry " + name + " fails its CRC-32 check");
  }
}

}  // namespace recycle
