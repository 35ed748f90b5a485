#include "client/cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace tdstore::cli {
namespace {

constexpr auto kRedrawEvery = std::chrono::milliseconds(100);
constexpr int kBarCells = 20;

std::string FormatDuration(double seconds) {
  const auto total = static_cast<int64_t>(seconds + 0.5);
  char text[32];
  if (total >= 3600) {
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", static_cast<long long>(total / 3600),
                  static_cast<long long>(total / 60 % 60), static_cast<long long>(total % 60));
  } else {
    std::snprintf(text, sizeof text, "%lld:%02lld", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  }
  return text;
}

}  // namespace

std::string FormatBytes(int64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 6) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  return text;
}

std::string FormatProgress(int64_t done, int64_t total, double seconds) {
  const double fraction =
      total <= 0 ? 1.0 : std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
  const int filled = static_cast<int>(fraction * kBarCells);
  std::string text = "[" + std::string(filled, '#') + std::string(kBarCells - filled, '.') + "]";
  char percent[16];
  std::snprintf(percent, sizeof percent, "%3d%%", static_cast<int>(fraction * 100));
  text += std::string("  ") + percent + "  " + FormatBytes(done) + " / " + FormatBytes(total);
  if (done <= 0 || seconds <= 0) return text + "  -- B/s  ETA --:--";
  const double rate = static_cast<double>(done) / seconds;
  text += "  " + FormatBytes(static_cast<int64_t>(rate)) + "/s";
  const double left = done >= total ? 0 : static_cast<double>(total - done) / rate;
  return text + "  ETA " + FormatDuration(left);
}

bool ProgressWanted(bool quiet) { return !quiet && ::isatty(STDERR_FILENO) == 1; }

Progress::Progress(int64_t total_bytes, bool enabled)
    : total_(total_bytes), enabled_(enabled), start_(std::chrono::steady_clock::now()) {
  if (enabled_) thread_ = std::thread([this] { Run(); });
}

void Progress::Add(int64_t bytes) {
  added_ += bytes;
  done_ = added_;
}

core::Progress Progress::Tracker(int64_t offset, int passes) {
  return [this, offset, passes](int64_t moved, int64_t /*total*/) {
    done_ = added_ + (offset + moved) / passes;
  };
}

Progress::~Progress() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (shown_) {
    // Unfinished: erase the bar.
    std::fprintf(stderr, "\r%s\r", std::string(width_, ' ').c_str());
    std::fflush(stderr);
  }
}

void Progress::Finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (enabled_) {
    Draw(/*final=*/true);
    shown_ = false;
  }
}

void Progress::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, kRedrawEvery, [this] { return stop_; })) Draw(/*final=*/false);
}

// Called with mu_ held, or after the thread has stopped.
void Progress::Draw(bool final) {
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
  const std::string text = FormatProgress(done_.load(), total_, elapsed.count());
  // Pad over a longer previous text rather than rely on terminal escapes.
  const size_t pad = width_ > text.size() ? width_ - text.size() : 0;
  std::fprintf(stderr, "\r%s%s%s", text.c_str(), std::string(pad, ' ').c_str(),
               final ? "\n" : "");
  std::fflush(stderr);
  width_ = text.size();
  shown_ = true;
}

}  // namespace tdstore::cli
