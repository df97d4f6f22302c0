#include "model/model.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>

#include "core/error.h"
#include "io/gguf_reader.h"
#include "kernels/kernels.h"
#include "model/hf_loader.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace tandem {

Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& path, const kernels::KernelConfig& kernels,
                                   const std::optional<Requantization>& requant) {
  std::unique_ptr<Model> m(new Model());
  m->path_ = path;
  m->kernel_config_ = kernels;
  if (fs::is_directory(path)) {
    if (!is_hf_model_dir(path))
      fail("{}: not a model directory (no config.json with safetensors weights)", path);
    HFModelFiles hf = load_hf_model_dir(path);
    m->format_ = "hf";
    m->config_ = hf.config;
    m->tensors_ = std::move(hf.tensors);
    m->chat_template_ = hf.chat_template;
    if (!hf.tokenizer_json_path.empty())
      m->tokenizer_ = Tokenizer::from_hf_json(hf.tokenizer_json_path);
    m->stop_ids_ = hf.eos_token_ids;
  } else {
    if (!fs::exists(path)) fail("{}: no such file or directory", path);
    auto gguf = std::make_shared<GGUFFile>(path);
    m->format_ = "gguf";
    m->config_ = config_from_gguf(*gguf);
    m->tensors_.source = path;
    for (const auto& t : gguf->tensors()) m->tensors_.tensors.emplace(t.name, t);
    m->tensors_.keep_alive.push_back(gguf);
    m->chat_template_ = gguf->opt_string("tokenizer.chat_template").value_or("");
    if (gguf->has("tokenizer.ggml.model")) m->tokenizer_ = Tokenizer::from_gguf(*gguf);
  }
  m->weights_ = bind_weights(m->config_, m->tensors_);
  ThreadPool pool(0);  // the load's own: requantizing and packing are parallel
  if (requant) m->requantize_matrices(*requant, pool);
  m->pack_matrices(pool);
  if (m->tokenizer_) {
    check(m->tokenizer_->vocab_size() <= m->config_.vocab_size,
          "{}: tokenizer has {} tokens but the model's vocabulary is {}", path,
          m->tokenizer_->vocab_size(), m->config_.vocab_size);
    for (int id : m->tokenizer_->eog_ids()) m->stop_ids_.push_back(id);
  }
  std::sort(m->stop_ids_.begin(), m->stop_ids_.end());
  m->stop_ids_.erase(std::unique(m->stop_ids_.begin(), m->stop_ids_.end()), m->stop_ids_.end());
  return m;
}

void Model::for_each_matrix(const std::function<void(TensorView&)>& fn) {
  for (auto& L : weights_.layers)
    for (TensorView* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) fn(*t);
  fn(weights_.output);
}

void Model::requantize_matrices(const Requantization& r, ThreadPool& pool) {
  const auto start = std::chrono::steady_clock::now();
  auto convert = [&](TensorView& W) {
    if (!requantizes(W, r.type)) return;
    AlignedVector<uint8_t> data = requantize(W, r.type, pool);
    requantized_.file_bytes += W.nbytes;
    requantized_.bytes += data.size();
    ++requantized_.matrices;
    W.type = r.type;
    W.data = data.data();
    W.nbytes = data.size();
    requantized_data_.push_back(std::move(data));  // moving a vector keeps its buffer
  };
  // A tied output gets its own copy: the embedding lookup still reads tok_embd.
  for_each_matrix(convert);
  requantized_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void Model::pack_matrices(ThreadPool& pool) {
  const auto start = std::chrono::steady_clock::now();
  auto pack = [&](TensorView& W) {
    AlignedVector<uint8_t> copy = kernels::pack_weights(W, kernel_config_, pool);
    if (copy.empty()) return;
    W.packed = copy.data();
    packing_.bytes += copy.size();
    packing_.file_bytes += W.nbytes;
    ++packing_.matrices;
    packed_.push_back(std::move(copy));  // moving a vector keeps its buffer
  };
  for_each_matrix(pack);
  packing_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

const Tokenizer& Model::require_tokenizer() const {
  if (!tokenizer_) fail("{}: the model has no tokenizer", path_);
  return *tokenizer_;
}

bool Model::is_stop(int id) const {
  return std::binary_search(stop_ids_.begin(), stop_ids_.end(), id);
}

size_t Model::weight_bytes_per_token() const {
  size_t n = weights_.output.nbytes + weights_.output_norm.nbytes;
  for (const auto& L : weights_.layers)
    for (const TensorView* t : {&L.attn_norm, &L.wq, &L.wk, &L.wv, &L.wo, &L.bq, &L.bk, &L.bv,
                                &L.ffn_norm, &L.w_gate, &L.w_up, &L.w_down})
      n += t->nbytes;
  return n - packing_.file_bytes + packing_.bytes;  // the packed copies are what is read
}

}  // namespace tandem
