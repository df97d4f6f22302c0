// Runs a fuzz target without libFuzzer, for compilers other than clang and for
// the normal test suite:
//   fuzz_NAME [--mutations N] [--seed S] [--max-len BYTES] [--crash-dir DIR] PATH...
// Every file under the PATHs runs once (seed corpora and the committed
// regression inputs), then N inputs made from them by stacked random mutations
// (bit flips, interesting integers at any offset, JSON tokens, cuts, inserts,
// splices) from a splitmix64 stream of the seed: the same inputs on every run
// and every machine. If an input crashes the target (a signal, a sanitizer
// report or a broken FUZZ_CHECK), it is written to DIR (default: the current
// directory) as crash-NAME-RUN before the process dies.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<uint8_t>;

// The input being run and where to save it if the process dies on it.
const Bytes* g_current = nullptr;
char g_crash_path[4096] = {};

void save_current_input() {
  if (!g_current || !g_crash_path[0]) return;
  int fd = ::open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  size_t off = 0;
  while (off < g_current->size()) {
    ssize_t n = ::write(fd, g_current->data() + off, g_current->size() - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  ::close(fd);
  const char msg[] = "standalone fuzz driver: crashing input saved to ";
  (void)!::write(2, msg, sizeof msg - 1);
  (void)!::write(2, g_crash_path, std::strlen(g_crash_path));
  (void)!::write(2, "\n", 1);
}

void on_fatal_signal(int sig) {
  save_current_input();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }
};

constexpr uint64_t kInterestingInts[] = {0,
                                         1,
                                         2,
                                         3,
                                         4,
                                         7,
                                         8,
                                         16,
                                         31,
                                         32,
                                         64,
                                         127,
                                         128,
                                         255,
                                         256,
                                         1023,
                                         1024,
                                         4096,
                                         32767,
                                         32768,
                                         65535,
                                         65536,
                                         0x7FFFFFFF,
                                         0x80000000,
                                         0xFFFFFFFF,
                                         0x100000000ull,
                                         uint64_t{1} << 40,
                                         uint64_t{1} << 48,
                                         uint64_t{1} << 62,
                                         uint64_t{1} << 63,
                                         0x7FFFFFFFFFFFFFFFull,
                                         0xFFFFFFFFFFFFFFFFull,
                                         0xFFFFFFFFFFFFFFFEull};

constexpr std::string_view kTokens[] = {"\"",
                                        "[",
                                        "]",
                                        "{",
                                        "}",
                                        ":",
                                        ",",
                                        "null",
                                        "true",
                                        "false",
                                        "-1",
                                        "0",
                                        "1e999",
                                        "-0.0",
                                        "18446744073709551616",
                                        "9223372036854775807",
                                        "2147483648",
                                        "\\u0000",
                                        "\\ud800",
                                        "\"\"",
                                        "[[[[[[[[[[[[[[[[",
                                        "{\"a\":",
                                        "<|im_start|>",
                                        "<|im_end|>",
                                        "<|start_header_id|>",
                                        "<|end_header_id|>",
                                        "<|eot_id|>",
                                        "\xff",
                                        "\xc3",
                                        "\n",
                                        " "};

void mutate_once(Bytes& b, const std::vector<Bytes>& corpus, SplitMix64& rng, size_t max_len) {
  switch (rng.below(9)) {
    case 0:  // flip a bit
      if (!b.empty()) b[rng.below(b.size())] ^= static_cast<uint8_t>(1u << rng.below(8));
      break;
    case 1:  // a random byte
      if (!b.empty()) b[rng.below(b.size())] = static_cast<uint8_t>(rng.next());
      break;
    case 2: {  // an interesting integer of 1, 2, 4 or 8 bytes, little-endian
      const size_t width = size_t{1} << rng.below(4);
      if (b.size() < width) break;
      uint64_t v = kInterestingInts[rng.below(std::size(kInterestingInts))];
      if (rng.below(4) == 0) v = ~v + 1;  // negated
      const size_t at = rng.below(b.size() - width + 1);
      std::memcpy(b.data() + at, &v, width);
      break;
    }
    case 3: {  // erase a range
      if (b.empty()) break;
      const size_t at = rng.below(b.size());
      const size_t n = 1 + rng.below(std::min<size_t>(b.size() - at, 64));
      b.erase(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
      break;
    }
    case 4: {  // insert a token
      const std::string_view t = kTokens[rng.below(std::size(kTokens))];
      const size_t at = rng.below(b.size() + 1);
      b.insert(b.begin() + static_cast<long>(at), t.begin(), t.end());
      break;
    }
    case 5:  // cut the tail
      if (!b.empty()) b.resize(rng.below(b.size()));
      break;
    case 6: {  // duplicate a range in place
      if (b.empty()) break;
      const size_t at = rng.below(b.size());
      const size_t n = 1 + rng.below(std::min<size_t>(b.size() - at, 256));
      Bytes chunk(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
      b.insert(b.begin() + static_cast<long>(rng.below(b.size() + 1)), chunk.begin(), chunk.end());
      break;
    }
    case 7: {  // splice in a piece of another input
      const Bytes& other = corpus[rng.below(corpus.size())];
      if (other.empty()) break;
      const size_t from = rng.below(other.size());
      const size_t n = 1 + rng.below(std::min<size_t>(other.size() - from, 512));
      const size_t at = rng.below(b.size() + 1);
      b.insert(b.begin() + static_cast<long>(at), other.begin() + static_cast<long>(from),
               other.begin() + static_cast<long>(from + n));
      break;
    }
    default: {  // an ASCII digit run changed (sizes and ids in JSON text)
      if (b.empty()) break;
      const size_t at = rng.below(b.size());
      if (b[at] >= '0' && b[at] <= '9')
        b[at] = static_cast<uint8_t>('0' + rng.below(10));
      else
        b[at] = '9';
      break;
    }
  }
  if (b.size() > max_len) b.resize(max_len);
}

void add_inputs(const fs::path& p, std::vector<Bytes>& out) {
  if (fs::is_directory(p)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(p))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());  // the same order on every run
    for (const auto& f : files) add_inputs(f, out);
    return;
  }
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", p.c_str());
    std::exit(2);
  }
  out.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void run(const Bytes& input, const std::string& crash_dir, const std::string& name,
         uint64_t index) {
  std::snprintf(g_crash_path, sizeof g_crash_path, "%s/crash-%s-%llu", crash_dir.c_str(),
                name.c_str(), static_cast<unsigned long long>(index));
  g_current = &input;
  LLVMFuzzerTestOneInput(input.data(), input.size());
  g_current = nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mutations = 0, seed = 1;
  size_t max_len = 1 << 20;
  std::string crash_dir = ".";
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--mutations")
      mutations = std::stoull(value());
    else if (a == "--seed")
      seed = std::stoull(value());
    else if (a == "--max-len")
      max_len = std::stoull(value());
    else if (a == "--crash-dir")
      crash_dir = value();
    else
      paths.push_back(a);
  }
  const std::string name = fs::path(argv[0]).filename().string();
  std::vector<Bytes> corpus;
  for (const auto& p : paths) add_inputs(p, corpus);
  if (corpus.empty()) corpus.emplace_back();  // mutate from nothing

  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(save_current_input);
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::signal(sig, on_fatal_signal);

  const auto start = std::chrono::steady_clock::now();
  uint64_t runs = 0;
  for (const Bytes& input : corpus) run(input, crash_dir, name, runs++);
  SplitMix64 rng{seed};
  for (uint64_t m = 0; m < mutations; ++m) {
    Bytes b = corpus[rng.below(corpus.size())];
    for (size_t k = 1 + rng.below(5); k > 0; --k) mutate_once(b, corpus, rng, max_len);
    run(b, crash_dir, name, runs++);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "%s: %llu inputs (%zu from files, %llu mutated, seed %llu) in %.1f s, %.0f/s, "
      "no crash\n",
      name.c_str(), static_cast<unsigned long long>(runs), corpus.size(),
      static_cast<unsigned long long>(mutations), static_cast<unsigned long long>(seed), s,
      s > 0 ? static_cast<double>(runs) / s : 0.0);
  return 0;
}
