// The constraint of a chat request with tools (OpenAI's tool_choice), as the
// engine's TokenConstraint: the text is free until the model opens a call, and
// from there on every token keeps to the grammar of a call to one of the
// offered functions with arguments that validate against its parameters
// schema (a lazy grammar). With tool_choice "required" or a named function the
// output opens with a call at once.
//
// A call opens in one of three ways, each with its own grammar:
//   - marked (Hermes, Qwen2.5): <tool_call>, the body "\n{...}\n",
//     </tool_call>; then another call (when parallel calls are allowed, after
//     at most a few newline tokens) or the end. The markers are special
//     tokens, allowed only where a call may open or has ended;
//   - bare: the output's first token starts the call's JSON object, which is
//     then the whole output (Llama 3.1+, whose template writes calls so; and
//     Qwen2.5-Coder, which does so too when it may answer in text);
//   - fenced: free text reaches a Markdown fence (```json\n) and the call's
//     object follows, up to the closing fence and the end of the output.
// Masks apply to the target's p and a draft's q alike, so greedy output is the
// same with and without speculation, as for response_format.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sampling/constraint.h"
#include "structured/grammar_matcher.h"

namespace tandem::structured {

// The token ids the constraint needs, found once per model.
struct ToolCallTokens {
  int open = -1, close = -1;            // the call markers (-1: the format has none)
  std::vector<int> separators;          // tokens of newlines only, allowed between calls
  std::vector<int> json_openers;        // tokens whose text starts with '{'
  std::vector<std::string> fence_open;  // free text that opens a fenced call
};

// The tokens of a vocabulary a tool-call format needs: the markers' ids (-1:
// none), and the separator and '{' tokens found in the vocabulary.
std::shared_ptr<const ToolCallTokens> find_tool_call_tokens(const TokenVocabulary& vocab, int open,
                                                            int close,
                                                            std::vector<std::string> fence_open);

// The grammar of a call opened each way (null: calls do not open that way).
struct ToolCallGrammars {
  std::shared_ptr<const Grammar> marked;  // between the markers
  std::shared_ptr<const Grammar> bare;    // the whole output
  std::shared_ptr<const Grammar> fenced;  // after a fence, closing fence included
};

class ToolCallConstraint final : public TokenConstraint {
 public:
  enum class Start { Free, Call };
  // Start::Call opens with the marker where there is one, else with the bare call.
  static std::shared_ptr<const ToolCallConstraint> start(
      const ToolCallGrammars& grammars, std::shared_ptr<const TokenVocabulary> vocab,
      std::shared_ptr<const ToolCallTokens> tokens, Start start, bool parallel);

  std::unique_ptr<TokenConstraint> fork() const override;
  bool mask(float* logits, int n_vocab) const override;
  bool allows(int token) const override;
  void advance(int token) override;

  // Where the output is: free text (its first token still to come: FreeStart),
  // before a call's opening marker, inside a call, or after a marked call.
  enum class Phase { Free, FreeStart, Open, Body, After };
  struct Matchers {
    std::optional<GrammarMatcher> marked, bare, fenced;  // each at the start of its call
  };
  ToolCallConstraint(std::shared_ptr<const Matchers> fresh,
                     std::shared_ptr<const ToolCallTokens> tokens, Phase phase, bool parallel);

 private:
  static constexpr int kMaxSeparators = 2;  // newline tokens between two calls
  const TokenVocabulary& vocab() const;
  bool is_opener(int token) const;
  bool is_separator(int token) const;
  bool is_eog(int token) const { return vocab().is_eog(token); }
  // Free text so far ends in a fence: the call it opens starts (true).
  bool open_fenced(int token);
  void open(const std::optional<GrammarMatcher>& fresh, bool marked);

  std::shared_ptr<const Matchers> fresh_;  // shared by the forks
  std::optional<GrammarMatcher> body_;     // the current call (FreeStart: a bare call's start)
  std::shared_ptr<const ToolCallTokens> tokens_;
  Phase phase_;
  bool parallel_;
  bool marked_ = false;  // the current call ends with the close marker
  int separators_ = 0;   // newline tokens since the last marked call ended
  std::string tail_;     // the end of the free text, to find fences in
};

}  // namespace tandem::structured
