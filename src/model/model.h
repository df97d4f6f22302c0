// A loaded model: configuration, weights (in place in the file's memory map),
// tokenizer and chat template, from a GGUF file or a Hugging Face directory.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/aligned.h"
#include "kernels/kernel_config.h"
#include "model/config.h"
#include "model/requantize.h"
#include "model/tensor_set.h"
#include "model/weights.h"

namespace tandem {

class Tokenizer;

class Model {
 public:
  // path: a .gguf file or a Hugging Face model directory. `kernels` decides the
  // weights' packing, and transformers over the model run the kernels it names.
  // `requant`: the matrices to requantize at load (model/requantize.h; a draft
  // model's), none by default. Throws tandem::Error.
  static std::unique_ptr<Model> load(const std::string& path,
                                     const kernels::KernelConfig& kernels = {},
                                     const std::optional<Requantization>& requant = std::nullopt);
  ~Model();

  const std::string& path() const { return path_; }
  const std::string& format() const { return format_; }  // "gguf" or "hf"
  const kernels::KernelConfig& kernel_config() const { return kernel_config_; }
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const TensorSet& tensors() const { return tensors_; }
  // Null when the file carries no tokenizer (some synthetic test models).
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const Tokenizer& require_tokenizer() const;
  const std::string& chat_template() const { return chat_template_; }
  // Token ids that end generation: the tokenizer's end-of-generation tokens plus
  // any eos ids from generation_config.json.
  const std::vector<int>& stop_ids() const { return stop_ids_; }
  bool is_stop(int id) const;
  // Copies made of matrices at load: how many, their bytes, the bytes of the
  // same matrices before (in the file, or as requantized) and the time it took.
  struct MatrixCopies {
    int matrices = 0;
    size_t bytes = 0;
    size_t file_bytes = 0;
    double seconds = 0;
  };
  // The copies in the matmul's preferred layout (see kernels::pack_weights).
  const MatrixCopies& packing() const { return packing_; }
  // The matrices requantized at load (none without `requant`).
  const MatrixCopies& requantized() const { return requantized_; }
  // Bytes of weights read for one token (every matrix once; the embedding row is negligible).
  size_t weight_bytes_per_token() const;

 private:
  Model() = default;
  // fn on every matrix a token's pass multiplies by: the layers' and the output.
  void for_each_matrix(const std::function<void(TensorView&)>& fn);
  void requantize_matrices(const Requantization& r, ThreadPool& pool);
  void pack_matrices(ThreadPool& pool);
  std::string path_, format_;
  kernels::KernelConfig kernel_config_;
  ModelConfig config_;
  TensorSet tensors_;
  ModelWeights weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::string chat_template_;
  std::vector<int> stop_ids_;
  std::vector<AlignedVector<uint8_t>> packed_;  // owns what weights_' packed point at
  // Owns what requantized matrices' data point at.
  std::vector<AlignedVector<uint8_t>> requantized_data_;
  MatrixCopies packing_;
  MatrixCopies requantized_;
};

}  // namespace tandem
