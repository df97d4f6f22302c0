// `tandem info -m MODEL`: architecture, dimensions, tensor types, tokenizer and
// chat template family of a model.
#include <fmt/format.h>

#include <map>
#include <memory>

#include "cli_common.h"
#include "commands.h"
#include "core/error.h"
#include "io/gguf_reader.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "info", "Show a model's architecture, dimensions, tensor types, tokenizer");
  struct Opts {
    std::string model;
    bool all_metadata = false;
    std::string quant = "none";
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("-m,--model", opts->model, "GGUF file or Hugging Face directory")->required();
  cmd->add_flag("--metadata", opts->all_metadata, "Also print every GGUF metadata key");
  cmd->add_option("--draft-quant", opts->quant,
                  "Load the model as a draft model is loaded with this --draft-quant (q4_0 or "
                  "none, the default here) and show what it requantizes")
      ->check(draft_quant_check())
      ->capture_default_str();
  cmd->callback([opts] {
    const Opts& o = *opts;
    auto m = load_model(o.model, parse_requantization(o.quant));
    const auto& c = m->config();
    fmt::print("model:          {}\n", m->path());
    fmt::print("format:         {}\n", m->format());
    fmt::print("name:           {}\n", c.name);
    fmt::print("architecture:   {}\n", c.arch_name);
    int64_t params = 0;
    std::map<std::string, int> types;
    size_t bytes = 0;
    for (const auto& [name, t] : m->tensors().tensors) {
      params += t.numel();
      bytes += t.nbytes;
      types[std::string(dtype_name(t.type))]++;
    }
    fmt::print("parameters:     {:.1f} M ({:.1f} MiB of tensors)\n", params / 1e6,
               bytes / 1048576.0);
    fmt::print("layers:         {}\n", c.n_layers);
    fmt::print("d_model:        {}\n", c.d_model);
    fmt::print("d_ff:           {}\n", c.d_ff);
    fmt::print("heads:          {} query, {} key/value (GQA {}:1), head dim {}\n", c.n_heads,
               c.n_kv_heads, c.n_heads / c.n_kv_heads, c.head_dim);
    fmt::print("vocabulary:     {}\n", c.vocab_size);
    fmt::print("context:        {}\n", c.context_length);
    fmt::print("rope:           theta {}, {} style{}\n", c.rope_theta,
               c.rope_style == kernels::RopeStyle::NeoX ? "NeoX" : "normal",
               c.rope_freq_factors.empty() && c.rope_scaling.type == RopeScaling::Type::None
                   ? ""
                   : ", scaled");
    fmt::print("rms norm eps:   {}\n", c.norm_eps);
    fmt::print("tied embedding: {}\n", c.tied_embeddings ? "yes" : "no");
    fmt::print("qkv bias:       {}\n", c.qkv_bias ? "yes" : "no");
    std::string type_list;
    for (const auto& [name, n] : types) type_list += fmt::format("{} {}  ", name, n);
    fmt::print("tensor types:   {}\n", type_list);
    if (const std::string rq = requantized_line(*m, o.quant); !rq.empty())
      fmt::print("requantized:    {}\n", rq);
    const auto& pk = m->packing();
    if (pk.matrices > 0)
      fmt::print("packed:         {} matrices, {:.1f} MiB in the {} kernel's layout, {:.2f} s\n",
                 pk.matrices, pk.bytes / 1048576.0, kernels::simd_target_name(), pk.seconds);
    else
      fmt::print("packed:         none (the kernels read the file's layout)\n");
    if (const Tokenizer* tok = m->tokenizer()) {
      fmt::print("tokenizer:      {} (pre-tokenizer {}), {} tokens, bos {}, eos {}\n", tok->kind(),
                 tok->pre(), tok->vocab_size(), tok->bos_id(), tok->eos_id());
    } else {
      fmt::print("tokenizer:      none\n");
    }
    std::string family = "none";
    if (!m->chat_template().empty()) {
      try {
        family = detect_chat_template(m->chat_template()) == ChatTemplateFamily::Llama3 ? "llama3"
                                                                                        : "chatml";
      } catch (const Error&) {
        family = "unknown";
      }
    }
    fmt::print("chat template:  {}\n", family);
    if (o.all_metadata && m->format() == "gguf") {
      GGUFFile f(m->path());
      for (const auto& [k, v] : f.metadata()) fmt::print("  {} = {}\n", k, gguf_value_to_string(v));
    }
  });
}

}  // namespace tandem::cli
