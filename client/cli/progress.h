// The progress bar of long transfers (import, export, cp, put, get):
//
//   [########............]  40%  1.6 GiB / 4.0 GiB  212.4 MiB/s  ETA 0:12
//
// drawn on stderr with '\r', at most 10 times a second, and only when stderr
// is a terminal and --quiet was not given: scripts and logs see nothing.
// On a terminal the final state stays on its own line.
//
// The byte count advances with every data chunk the core moves (its
// progress callback, via Tracker()), inside a leaf as between leaves.
#ifndef TDSTORE_CLIENT_CLI_PROGRESS_H_
#define TDSTORE_CLIENT_CLI_PROGRESS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "tdstore/core.h"

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

  // Counts the bytes of a finished step. Called from the thread that made
  // this object (so are the callbacks below).
  void Add(int64_t bytes);
  // The callback for one core call (ReadOptions/WriteOptions::progress).
  // While the call runs, the bar shows (offset + the bytes it has moved) /
  // passes on top of what Add() counted: cp moves each byte twice, reading
  // with Tracker(0, 2) and writing with Tracker(group_bytes, 2). A retried
  // call starts again from 0, and so does its share of the bar. Add() the
  // call's bytes once it returns. Valid while this object lives.
  core::Progress Tracker(int64_t offset = 0, int passes = 1);
  // The bytes the bar shows now. Any thread.
  int64_t done() const { return done_.load(); }
  // Draws the final state (if enabled) and ends its line.
  void Finish();

 private:
  void Run();
  void Draw(bool final);

  const int64_t total_;
  const bool enabled_;
  const std::chrono::steady_clock::time_point start_;
  int64_t added_ = 0;             // by Add(); the caller's thread only
  std::atomic<int64_t> done_{0};  // added_ + the running call's share

  std::mutex mu_;  // guards stop_, shown_, width_ and drawing
  std::condition_variable wake_;
  bool stop_ = false;
  bool shown_ = false;   // something is on the line
  size_t width_ = 0;     // length of the last text drawn
  std::thread thread_;
};

}  // namespace tdstore::cli

#endif  // TDSTORE_CLIENT_CLI_PROGRESS_H_
