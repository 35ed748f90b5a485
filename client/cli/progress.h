// The progress bar of long transfers (import, export, cp, put, get):
//
//   [########............]  40%  1.6 GiB / 4.0 GiB  212.4 MiB/s  ETA 0:12
//
// drawn on stderr with '\r', at most 10 times a second, and only when stderr
// is a terminal and --quiet was not given: scripts and logs see nothing.
// On a terminal the final state stays on its own line.
//
// The client library reports no progress inside one leaf's transfer, so the
// byte count advances as each leaf (or file) is done; the clock, rate and
// ETA keep moving meanwhile.
#ifndef TDSTORE_CLIENT_CLI_PROGRESS_H_
#define TDSTORE_CLIENT_CLI_PROGRESS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace tdstore::cli {

// The bar's text for `done` of `total` bytes after `seconds`, as above. The
// rate and ETA read "--" until a byte is done. Pure; any thread.
std::string FormatProgress(int64_t done, int64_t total, double seconds);

// "0 B", "512 B", "1.5 KiB", "4.0 GiB". Pure; any thread.
std::string FormatBytes(int64_t bytes);

// True when a bar may be drawn: stderr is a terminal and !quiet.
bool ProgressWanted(bool quiet);

// put and get draw a bar only for files of at least this many bytes; the
// transfers of import, export and cp always have one.
inline constexpr int64_t kLargeFileBytes = 64 << 20;

class Progress {
 public:
  // Starts the clock, and when `enabled` a thread that redraws the bar.
  Progress(int64_t total_bytes, bool enabled);
  // Stops the thread; a bar left unfinished (an error) is erased so the
  // error message starts on a clean line.
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Counts bytes done. Any thread.
  void Add(int64_t bytes) { done_ += bytes; }
  // Draws the final state (if enabled) and ends its line.
  void Finish();

 private:
  void Run();
  void Draw(bool final);

  const int64_t total_;
  const bool enabled_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<int64_t> done_{0};

  std::mutex mu_;  // guards stop_, shown_, width_ and drawing
  std::condition_variable wake_;
  bool stop_ = false;
  bool shown_ = false;   // something is on the line
  size_t width_ = 0;     // length of the last text drawn
  std::thread thread_;
};

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_PROGRESS_H_
