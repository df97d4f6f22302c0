#include "engine/sequence.h"

#include "core/error.h"
#include "engine/text_stream.h"
#include "model/model.h"

namespace tandem {

Sequence::Sequence(int id, const Model& model, Request request)
    : id_(id),
      model_(model),
      request_(std::move(request)),
      tokens_(request_.prompt),
      n_prompt_(static_cast<int>(request_.prompt.size())),
      rng_(request_.params.sampling.seed) {
  check(n_prompt_ > 0, "empty prompt");
  check(params().max_tokens >= 0, "max_tokens must be >= 0, got {}", params().max_tokens);
  params().sampling.validate();
  if (const Tokenizer* tok = model.tokenizer())
    text_ = std::make_unique<TextStream>(*tok, params().stop_strings);
  stats_.n_prompt = n_prompt_;
  if (params().max_tokens == 0) finish_reason_ = "length";
}

Sequence::~Sequence() = default;

bool Sequence::accept(int token) {
  if (finished()) return false;
  if (!params().ignore_eos && model_.is_stop(token)) {
    finish_reason_ = "stop";
  } else {
    tokens_.push_back(token);
    stats_.n_generated = n_generated();
    if (text_ && text_->push(token))
      finish_reason_ = "stop";
    else if (remaining() <= 0)
      finish_reason_ = "length";
  }
  emit_ready_text();
  return !finished();
}

void Sequence::emit_ready_text() {
  if (!text_ || !request_.on_text) return;
  std::string piece = finished() ? text_->finish() : text_->take_ready();
  if (!piece.empty()) request_.on_text(piece);
}

void Sequence::cancel() { abort("cancelled"); }

void Sequence::abort(const std::string& reason) {
  if (!finished()) finish_reason_ = reason;
}

bool Sequence::notify_finished(const RequestResult& r) const {
  if (!request_.on_finish) return false;
  request_.on_finish(r);
  return true;
}

RequestResult Sequence::result() {
  RequestResult r;
  r.tokens.assign(tokens_.begin() + n_prompt_, tokens_.end());
  if (text_) {
    // A request cancelled or aborted between tokens still holds back text (an
    // incomplete UTF-8 character, a possible stop-string prefix): it goes to the
    // stream too, so that the streamed text is always the result's text.
    std::string tail = text_->finish();
    if (!tail.empty() && request_.on_text) request_.on_text(tail);
    r.text = text_->text();
  }
  r.finish_reason = finish_reason_;
  r.stats = stats_;
  return r;
}

}  // namespace tandem
