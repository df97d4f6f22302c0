// The text of recent requests, searchable by suffix: where the tail of a new
// request's text occurred in the prompts and outputs of earlier ones, and what
// followed it there (SuffixDecoding, Oliaro et al., arXiv 2411.04975, drafts
// from such an index of earlier outputs). Agents resend tool-call scaffolding,
// JSON keys and code they have seen before, so the continuation of the longest
// match is often what the target writes next.
//
// Rules:
//  - Bounded memory. The text lives in a ring of `budget` tokens allocated
//    once; adding a document evicts the oldest documents until it fits (a
//    document longer than the whole budget keeps its last `budget` tokens).
//    About 16 bytes a token in all: the ring, a chain link per token, the
//    hash heads.
//  - Tenant isolation. Every document belongs to a tenant (the server derives
//    it from the request's API key) and a lookup only ever reads documents of
//    the tenant it names: the candidates are checked one by one, so no hash
//    collision can leak text across tenants.
//  - Lookups allocate nothing (the continuation goes into the caller's buffer).
//
// How a match is found: positions are chained by a hash of the tenant and the
// kAnchor tokens before them (the hash chains of LZ77 compressors); the most
// recent max_candidates positions of the context's anchor are extended
// backwards, and the longest match (the most recent among equals) wins.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace tandem {

class SuffixIndex {
 public:
  static constexpr int kAnchor = 3;          // tokens hashed: the shortest match found
  static constexpr int kMaxMatch = 64;       // backward extension stops here
  static constexpr int kMaxCandidates = 32;  // chain entries examined per lookup

  // budget: the most tokens held (at least kAnchor + 1). heads: the hash table's
  // size, a power of two (0: about one per two tokens; tests force collisions
  // with 1).
  explicit SuffixIndex(size_t budget, size_t heads = 0);

  // Add one document: a finished request's prompt and output, of `tenant`.
  void add(uint64_t tenant, std::span<const int> tokens);

  struct Match {
    int length = 0;     // tokens of the context's tail matched (0: none)
    int available = 0;  // continuation tokens copied into the output
  };
  // The continuation (up to k tokens) of the longest match of `context`'s tail
  // of at least min_match tokens (never fewer than kAnchor) in `tenant`'s
  // documents, into `out` (cleared first; its buffer reused).
  Match lookup(uint64_t tenant, std::span<const int> context, int k, int min_match,
               std::vector<int>& out) const;

  size_t budget() const { return ring_.size(); }
  // Tokens held now (at most budget()), and the documents they belong to.
  size_t tokens() const { return static_cast<size_t>(end_ - begin_); }
  size_t documents() const { return docs_.size(); }

 private:
  struct Document {
    uint64_t start;  // global position of its first token
    uint64_t end;    // one past its last
    uint64_t tenant;
  };
  // Positions are global (they only grow); token p sits at ring_[p % budget].
  int at(uint64_t p) const { return ring_[p % ring_.size()]; }
  bool live(uint64_t p) const { return p >= begin_ && p < end_; }
  uint64_t anchor_hash(uint64_t tenant, const int* tokens) const;
  // The document holding position p (which must be live).
  const Document& document_of(uint64_t p) const;
  void evict_until_room_for(size_t n);

  std::vector<int> ring_;
  // prev_[p % budget]: the previous position (+1; 0: none) whose anchor hashed
  // like p's. head_[hash]: the latest such position (+1).
  std::vector<uint64_t> prev_;
  std::vector<uint64_t> head_;
  uint64_t hash_mask_ = 0;
  uint64_t begin_ = 0, end_ = 0;  // the live positions: [begin_, end_)
  std::deque<Document> docs_;     // oldest first; together they cover [begin_, end_)
};

}  // namespace tandem
