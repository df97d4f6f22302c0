#include "tokenizer/regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace tandem {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

struct MatchData {
  pcre2_match_data* md;
  explicit MatchData(const pcre2_code* code)
      : md(pcre2_match_data_create_from_pattern(code, nullptr)) {
    check(md != nullptr, "out of memory creating regex match data");
  }
  ~MatchData() { pcre2_match_data_free(md); }
};

}  // namespace

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(const std::vector<std::string>& patterns, const std::string& source)
    : patterns_(patterns) {
  for (const auto& p : patterns_) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    auto c = std::make_unique<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), PCRE2_UTF | PCRE2_UCP,
                            &err, &offset, nullptr);
    if (c->code == nullptr)
      fail("{}: pre-tokenizer regex '{}' does not compile at offset {}: {}", source, p, offset,
           pcre2_message(err));
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);  // optional: falls back to the interpreter
    compiled_.push_back(std::move(c));
  }
}

RegexSplitter::~RegexSplitter() = default;

std::vector<std::string_view> RegexSplitter::split(std::string_view text) const {
  // First cut out bytes that are not UTF-8, so the patterns only see valid text.
  std::vector<std::string_view> pieces;
  std::vector<bool> is_text;
  {
    size_t run = 0, i = 0;
    uint32_t cp;
    while (i < text.size()) {
      size_t n = utf8::decode(text, i, cp);
      if (n != 0) {
        i += n;
        continue;
      }
      if (i > run) {
        pieces.push_back(text.substr(run, i - run));
        is_text.push_back(true);
      }
      pieces.push_back(text.substr(i, 1));
      is_text.push_back(false);
      run = ++i;
    }
    if (i > run) {
      pieces.push_back(text.substr(run, i - run));
      is_text.push_back(true);
    }
  }

  for (const auto& c : compiled_) {
    MatchData m(c->code);
    std::vector<std::string_view> next;
    std::vector<bool> next_is_text;
    next.reserve(pieces.size() * 2);
    for (size_t k = 0; k < pieces.size(); ++k) {
      std::string_view s = pieces[k];
      if (!is_text[k]) {
        next.push_back(s);
        next_is_text.push_back(false);
        continue;
      }
      auto subject = reinterpret_cast<PCRE2_SPTR>(s.data());
      size_t pos = 0, gap = 0;
      while (pos < s.size()) {
        int rc = pcre2_match(c->code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK, m.md, nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // deep backtracking: the interpreter copes
          rc = pcre2_match(c->code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, m.md,
                           nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0)
          fail("pre-tokenizer regex failed on a {}-byte piece: {}", s.size(), pcre2_message(rc));
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(m.md);
        size_t b = ov[0], e = ov[1];
        if (e == b) {  // an empty match splits nothing; step over one character
          uint32_t cp;
          size_t n = utf8::decode(s, b, cp);
          pos = b + (n ? n : 1);
          continue;
        }
        if (b > gap) {
          next.push_back(s.substr(gap, b - gap));
          next_is_text.push_back(true);
        }
        next.push_back(s.substr(b, e - b));
        next_is_text.push_back(true);
        pos = gap = e;
      }
      if (gap < s.size()) {
        next.push_back(s.substr(gap));
        next_is_text.push_back(true);
      }
    }
    pieces = std::move(next);
    is_text = std::move(next_is_text);
  }
  return pieces;
}

}  // namespace tandem
