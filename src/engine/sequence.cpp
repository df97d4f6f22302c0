#include "engine/sequence.h"

#include "core/error.h"
#include "engine/text_stream.h"
#include "model/model.h"

namespace tandem {

Sequence::Sequence(int id, const Model& model, Request request)
    : Generation(id, std::move(request.prompt), request.params),
      model_(model),
      request_(std::move(request)) {
  if (const Tokenizer* tok = model.tokenizer())
    text_ = std::make_unique<TextStream>(*tok, params().stop_strings);
  if (params().max_tokens == 0) finish_reason_ = "length";
}

Sequence::~Sequence() = default;

bool Sequence::accept(const EmittedToken& token) {
  if (finished()) return false;
  const bool appended = params().ignore_eos || !model_.is_stop(token.id);
  if (!appended) {
    finish_reason_ = "stop";
  } else {
    append(token.id);
    if (token.logprobs) logprobs_.push_back(*token.logprobs);
    if (text_ && text_->push(token.id))
      finish_reason_ = "stop";
    else if (remaining() <= 0)
      finish_reason_ = "length";
  }
  emit_ready_text(appended ? &token : nullptr);
  return !finished();
}

void Sequence::emit_ready_text(const EmittedToken* token) {
  if (!text_ || (!request_.on_text && !request_.on_token)) return;
  emit(finished() ? text_->finish() : text_->take_ready(), token);
}

void Sequence::emit(std::string piece, const EmittedToken* token) {
  if (!piece.empty() && request_.on_text) request_.on_text(piece);
  if (request_.on_token && (token || !piece.empty())) {
    TokenOutput out{-1, false, std::move(piece), nullptr, &stats()};
    if (token) {
      out.id = token->id;
      out.drafted = token->drafted;
      out.logprobs = token->logprobs;
    }
    request_.on_token(out);
  }
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
  r.tokens.assign(tokens().begin() + n_prompt(), tokens().end());
  if (text_) {
    // A request cancelled or aborted between tokens still holds back text (an
    // incomplete UTF-8 character, a possible stop-string prefix): it goes to the
    // stream too, so that the streamed text is always the result's text.
    emit(text_->finish(), nullptr);
    r.text = text_->text();
  }
  r.finish_reason = finish_reason_;
  r.stats = stats();
  r.logprobs = std::move(logprobs_);
  return r;
}

}  // namespace tandem
