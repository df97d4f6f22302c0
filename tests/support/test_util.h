// Small helpers shared by the unit tests.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tandem::test {

// n token ids in [0, vocab) from a linear congruential stream: the same on every
// platform, different for each seed.
std::vector<int> pseudo_random_ids(int n, int vocab, uint32_t seed);

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

// The message of the tandem::Error that f throws, or "" when it throws none.
std::string error_of(const std::function<void()>& f);

}  // namespace tandem::test
