// One e-mail as one line of text for a `label<TAB>text` file: what the text task keeps of a
// message's headers and body, and how its whitespace is folded. No LibTorch here.
//
// A mail is its header lines, a blank line, then its body. Of the headers only Subject and From
// are kept: the others (Received chains, dates, message ids, the collecting hosts) say which
// mailbox and which year a message came from, not what it is, and they would fill a model's
// input window before the body starts. The line is
//     subject: SUBJECT | from: FROM | BODY
// with every run of whitespace and ASCII control characters (tabs and line breaks among them)
// folded into one space, and the ends trimmed. It is cut at `max_bytes` on a UTF-8 character
// boundary. Everything here is a pure function of its arguments; thread safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace recycle {

// The parts of a mail the text task reads. Header values are unfolded (a continuation line,
// one that starts with a space or a tab, joins the line before it) and trimmed; a header that
// is missing is "". A header named twice keeps its first value. Without a blank line the
// whole mail is headers and the body is "".
struct MailParts {
  std::string subject;
  std::string from;
  std::string body;
};
MailParts split_mail(std::string_view mail);

// Every run of bytes <= 0x20 or 0x7f (whitespace and ASCII control characters) becomes one
// space; leading and trailing runs are dropped. UTF-8 multi-byte characters pass unchanged.
std::string fold_whitespace(std::string_view text);

// `text` cut to at most max_bytes bytes without splitting a UTF-8 character (a cut that would
// fall inside one drops that character whole).
std::string cut_utf8(std::string_view text, size_t max_bytes);

// The line for a mail: "subject: S | from: F | BODY" folded and cut as described above.
// max_bytes must be at least 1.
std::string mail_to_text(std::string_view mail, size_t max_bytes);

}  // namespace recycle
