// Where tests find their inputs: the shared test data beside the checkout and the
// model cache that `make models` fills. Both fail the test clearly when absent.
#pragma once
#include <string>

namespace tandem::test {

// ../shared/testdata relative to the repository root.
std::string shared_testdata_dir();
// The model cache (TANDEM_CACHE or ~/.cache/tandem); returns the path of a
// fetched model file such as "smollm2-135m-instruct-q4_1.gguf", failing the test
// with a hint to run `make models` when it is missing.
std::string cached_model(const std::string& file_name);
// A fresh temporary directory for this test.
std::string temp_dir(const std::string& tag);
std::string source_dir();
std::string binary_dir();

}  // namespace tandem::test
