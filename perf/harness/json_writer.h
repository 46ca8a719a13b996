// A small streaming JSON writer: keys, values, objects and lists, with commas and escaping
// handled by a stack of states. It writes into a string that the caller drains to a file as it
// goes, so a long sweep leaves a usable prefix behind.
#ifndef LOOM_PERF_HARNESS_JSON_WRITER_H_
#define LOOM_PERF_HARNESS_JSON_WRITER_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace loomperf {

// `text` as a JSON string literal, quotes included; control and non-ASCII bytes are \u-escaped.
std::string jsonQuote(std::string_view text);

class JsonWriter {
 public:
  void beginObject();
  void endObject();
  void beginList();
  void endList();
  void key(std::string_view name);
  void str(std::string_view value);
  void integer(long long value);
  void size(size_t value);
  // nccl-tests' %lf formatting; NaN becomes the string "nan".
  void number(double value);
  void null();
  // nccl-tests writes booleans as the strings "true" and "false"; so do we.
  void boolString(bool value);
  // Closes open objects and lists (a key left open gets null) until `depth` remain open.
  void closeTo(size_t depth);
  void closeAll() { closeTo(0); }
  size_t depth() const { return stack_.size(); }

  // The text written since the last drain.
  std::string drain();
  bool complete() const { return stack_.empty(); }

 private:
  enum class State { kKey, kObjectEmpty, kObjectSome, kListEmpty, kListSome };
  void beforeValue();
  std::vector<State> stack_;
  std::string out_;
};

}  // namespace loomperf

#endif  // LOOM_PERF_HARNESS_JSON_WRITER_H_
