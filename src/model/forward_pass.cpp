#include "model/forward_pass.h"

#include "model/transformer.h"

namespace tandem {

std::unique_ptr<ForwardPass> make_forward_pass(const ForwardPassFactory& factory,
                                               const Model& model, ThreadPool& pool,
                                               const ForwardPassSpec& spec) {
  if (factory) return factory(model, pool, spec);
  return std::make_unique<Transformer>(model, pool, spec.max_tokens);
}

}  // namespace tandem
