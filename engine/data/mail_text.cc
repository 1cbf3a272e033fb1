#include "engine/data/mail_text.h"

#include <cctype>
#include <stdexcept>

namespace recycle {
namespace {

bool is_fold_byte(unsigned char c) { return c <= 0x20 || c == 0x7f; }

// The next line of `text` from `pos` (without its "\n" or "\r\n"); advances pos past it.
std::string_view next_line(std::string_view text, size_t* pos) {
  const size_t start = *pos;
  size_t end = text.find('\n', start);
  if (end == std::string_view::npos) end = text.size();
  *pos = end < text.size() ? end + 1 : end;
  std::string_view line = text.substr(start, end - start);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

bool header_is(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || line[name.size()] != ':') return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  }
  return true;
}

}  // namespace

MailParts split_mail(std::string_view mail) {
  MailParts parts;
  std::string* current = nullptr;  // the header value a continuation line extends
  bool have_subject = false;
  bool have_from = false;
  size_t pos = 0;
  while (pos < mail.size()) {
    const std::string_view line = next_line(mail, &pos);
    if (line.empty()) {
      parts.body = std::string(mail.substr(pos));
      break;
    }
    if (line[0] == ' ' || line[0] == '\t') {
      if (current != nullptr) current->append(" ").append(line);
      continue;
    }
    current = nullptr;
    if (!have_subject && header_is(line, "subject")) {
      have_subject = true;
      parts.subject = std::string(line.substr(8));
      current = &parts.subject;
    } else if (!have_from && header_is(line, "from")) {
      have_from = true;
      parts.from = std::string(line.substr(5));
      current = &parts.from;
    }
  }
  parts.subject = fold_whitespace(parts.subject);
  parts.from = fold_whitespace(parts.from);
  return parts;
}

std::string fold_whitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (const char ch : text) {
    if (is_fold_byte(static_cast<unsigned char>(ch))) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    out.push_back(ch);
  }
  return out;
}

std::string cut_utf8(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t end = max_bytes;
  // Back up over continuation bytes (10xxxxxx) to the lead byte of the character the cut falls
  // in, and drop that character.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return std::string(text.substr(0, end));
}

std::string mail_to_text(std::string_view mail, size_t max_bytes) {
  if (max_bytes == 0) throw std::invalid_argument("mail_to_text: max_bytes must be at least 1");
  const MailParts parts = split_mail(mail);
  // One fold over the whole line also joins the gaps an empty header or body leaves.
  const std::string line =
      fold_whitespace("subject: " + parts.subject + " | from: " + parts.from + " | " + parts.body);
  return cut_utf8(line, max_bytes);
}

}  // namespace recycle
