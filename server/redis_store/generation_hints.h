// The generations a daemon proposes for the writes it sends at once
// (WriteTxn's at-once path, leaf_writer.h), whose parts' keys must be named
// before the transaction runs.
//
//   int64_t first = hints.Propose(id, 2);  // propose first, first + 1
//   ... claim_generations.lua refused: Redis' counter was `counter`
//   hints.Saw(id, counter);                // the next proposal is past it
//
// A proposal is only a guess: claim_generations.lua claims it against the
// dict's counter inside the write's own MULTI ... EXEC, or refuses it
// (TDGEN <counter>) and the write proposes again. So nothing here must
// agree with Redis: a lost, stale or never-seen hint costs a refused
// proposal, never a shared generation.
//
// Thread-safe. Memory: one number per dict written, all dropped past
// kMaxDicts (a dict's next write then guesses from 1).
#ifndef TDSTORE_SERVER_REDIS_STORE_GENERATION_HINTS_H_
#define TDSTORE_SERVER_REDIS_STORE_GENERATION_HINTS_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tdstore::store {

class GenerationHints {
 public:
  static constexpr size_t kMaxDicts = 4096;

  // The first of `count` consecutive generations to propose for dict `id`:
  // past every one proposed or seen for it here.
  int64_t Propose(std::string_view id, int64_t count);
  // Redis' counter of dict `id` was `counter` when a proposal was refused.
  void Saw(std::string_view id, int64_t counter);

 private:
  std::mutex mu_;
  std::unordered_map<std::string, int64_t> next_;  // by dict id; guarded by mu_
};

}  // namespace tdstore::store

#endif  // TDSTORE_SERVER_REDIS_STORE_GENERATION_HINTS_H_
