#include "engine/sequence.h"

#include "core/error.h"
#include "engine/text_stream.h"
#include "model/model.h"

namespace tandem {

Sequence::Sequence(int id, const Model& model, Request request)
    : Generation(id, std::move(request.prompt), std::move(request.params)),
      model_(model),
      on_text_(std::move(request.on_text)),
      on_token_(std::move(request.on_token)),
      on_finish_(std::move(request.on_finish)) {
  if (const Tokenizer* tok = model.tokenizer())
    text_ = std::make_unique<TextStream>(*tok, params().stop_strings, params().text_special_tokens);
  if (params().max_tokens == 0) finish_reason_ = FinishReason::Length;
}

Sequence::~Sequence() = default;

bool Sequence::accept(const EmittedToken& token) {
  if (finished()) return false;
  const bool appended = params().ignore_eos || !model_.is_stop(token.id);
  if (!appended) {
    finish_reason_ = FinishReason::Stop;
  } else {
    append(token.id);
    if (token.logprobs) logprobs_.push_back(*token.logprobs);
    if (text_ && text_->push(token.id))
      finish_reason_ = FinishReason::Stop;
    else if (remaining() <= 0)
      finish_reason_ = FinishReason::Length;
  }
  emit_ready_text(appended ? &token : nullptr);
  return !finished();
}

void Sequence::emit_ready_text(const EmittedToken* token) {
  if (!text_ || (!on_text_ && !on_token_)) return;
  emit(finished() ? text_->finish() : text_->take_ready(), token);
}

void Sequence::emit(std::string piece, const EmittedToken* token) {
  if (!piece.empty() && on_text_) on_text_(piece);
  if (on_token_ && (token || !piece.empty())) {
    TokenOutput out{-1, false, std::move(piece), nullptr, &stats()};
    if (token) {
      out.id = token->id;
      out.drafted = token->drafted;
      out.logprobs = token->logprobs;
    }
    on_token_(out);
  }
}

void Sequence::abort(FinishReason reason) {
  if (!finished()) finish_reason_ = reason;
}

bool Sequence::notify_finished(const RequestResult& r) const {
  if (!on_finish_) return false;
  on_finish_(r);
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
