#include "tokenizer_probe.h"

#include <string_view>

#include "core/error.h"
#include "fuzz_support.h"

namespace tandem::fuzz {

void probe_tokenizer(const Tokenizer& tok) {
  constexpr std::string_view kText =
      "Hello world!  123 4567 <|im_start|>user\n<|eot_id|> caf\xc3\xa9 \xff\xfe\t\x01 end";
  for (bool parse_special : {false, true}) {
    std::vector<int> ids;
    try {
      ids = tok.encode(kText, tok.bos_id() >= 0 && tok.add_bos(), parse_special);
    } catch (const Error&) {
      continue;  // a vocabulary that cannot encode these bytes says so
    }
    for (int id : ids) FUZZ_CHECK(id >= 0 && id < tok.vocab_size());
    (void)tok.decode(ids, parse_special);
  }
  for (int id : tok.eog_ids()) FUZZ_CHECK(id >= 0 && id < tok.vocab_size());
}

}  // namespace tandem::fuzz
