// verify_zip_checksums: checks every stored entry of a zip file (the container of LibTorch's
// and PyTorch's saved weights) against the CRC-32 in its central directory. LibTorch reads
// these files with CRC checks compiled out, so a flipped byte in a tensor would otherwise be
// loaded without a word. No LibTorch here.
#pragma once

#include <string>

namespace recycle {

// Throws std::runtime_error naming the file and the entry when a checksum differs or the zip
// structure is broken. Entries stored compressed, and zip64 archives, are not checked (LibTorch
// writes neither for weights below 4 GB).
void verify_zip_checksums(const std::string& path);

}  // namespace recycle
