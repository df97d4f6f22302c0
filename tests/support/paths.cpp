#include "support/paths.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace fs = std::filesystem;

namespace tandem::test {

std::string source_dir() { return TANDEM_SOURCE_DIR; }
std::string binary_dir() { return TANDEM_BINARY_DIR; }

std::string shared_testdata_dir() {
  fs::path p = fs::path(TANDEM_SOURCE_DIR) / ".." / "shared" / "testdata";
  if (!fs::is_directory(p)) {
    ADD_FAILURE() << "shared test data not found at " << p
                  << " (expected ../shared beside the repository root)";
    throw std::runtime_error("missing ../shared/testdata");
  }
  return fs::weakly_canonical(p).string();
}

static fs::path cache_dir() {
  if (const char* c = std::getenv("TANDEM_CACHE"); c && *c) return c;
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : "/tmp") / ".cache" / "tandem";
}

std::string cached_model(const std::string& file_name) {
  fs::path p = cache_dir() / "models" / file_name;
  if (!fs::exists(p)) {
    ADD_FAILURE() << "model " << p << " not found: run `make models` first";
    throw std::runtime_error("missing model " + p.string());
  }
  return p.string();
}

std::string temp_dir(const std::string& tag) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = tag;
  if (info) name += std::string("-") + info->test_suite_name() + "-" + info->name();
  fs::path p = fs::temp_directory_path() / ("tandem-test-" + std::to_string(::getpid())) / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

}  // namespace tandem::test
