// Reading tdstored's Prometheus /metrics in end-to-end tests: a plain
// HTTP/1.0 GET and the parsed series of one scrape.
#ifndef TDSTORE_TESTS_E2E_METRICS_SCRAPE_H_
#define TDSTORE_TESTS_E2E_METRICS_SCRAPE_H_

#include <map>
#include <sstream>
#include <vector>
#include <string>

namespace tdstore::testing {

// GET `url` ("http://127.0.0.1:PORT/path") over a plain socket, HTTP/1.0 so
// the server closes when done. The body; a test failure and "" unless the
// status is 200.
std::string HttpGet(const std::string& url);

// One scrape: series ("name{label="value",...}" as exposed) -> value.
class Scrape {
 public:
  explicit Scrape(const std::string& url) : text_(HttpGet(url)) {
    std::istringstream in(text_);
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      const size_t space = line.rfind(' ');
      if (space == std::string::npos) continue;
      series_[line.substr(0, space)] = std::stod(line.substr(space + 1));
    }
  }

  // The series `name` with exactly these labels (prometheus-cpp writes them
  // sorted by name, as std::map iterates); 0 if absent, as for a counter
  // never touched.
  double Value(const std::string& name,
               const std::map<std::string, std::string>& labels = {}) const {
    std::string key = name;
    if (!labels.empty()) {
      key += "{";
      for (const auto& [k, v] : labels) {
        if (key.back() != '{') key += ",";
        key += k + "=\"" + v + "\"";
      }
      key += "}";
    }
    auto it = series_.find(key);
    return it == series_.end() ? 0 : it->second;
  }
  // Sum over every series of `name` (any labels).
  double Sum(const std::string& name) const {
    double sum = 0;
    for (const auto& [key, value] : series_) {
      if (key == name || key.rfind(name + "{", 0) == 0) sum += value;
    }
    return sum;
  }
  // A series by its exact text, e.g. a histogram bucket, whose `le` label
  // comes last: `h_bucket{method="m",le="+Inf"}`. 0 if absent.
  double Raw(const std::string& series) const {
    auto it = series_.find(series);
    return it == series_.end() ? 0 : it->second;
  }
  // The values of every labelled series of `name`.
  std::vector<double> All(const std::string& name) const {
    std::vector<double> values;
    for (const auto& [key, value] : series_) {
      if (key.rfind(name + "{", 0) == 0) values.push_back(value);
    }
    return values;
  }

  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::map<std::string, double> series_;
};

}  // namespace tdstore::testing

#endif  // TDSTORE_TESTS_E2E_METRICS_SCRAPE_H_
