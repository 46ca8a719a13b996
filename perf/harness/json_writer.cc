#include "perf/harness/json_writer.h"

#include <cinttypes>
#include <cstdio>
#include <stdexcept>

namespace loomperf {

std::string jsonQuote(std::string_view text) {
  std::string q = "\"";
  for (unsigned char ch : text) {
    switch (ch) {
      case '"':
        q += "\\\"";
        break;
      case '\\':
        q += "\\\\";
        break;
      case '\n':
        q += "\\n";
        break;
      case '\t':
        q += "\\t";
        break;
      default:
        if (ch < 0x20 || ch >= 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          q += buf;
        } else {
          q += static_cast<char>(ch);
        }
    }
  }
  return q + "\"";
}

// A value is allowed at top level, after a key, or in a list (after a comma if not first).
void JsonWriter::beforeValue() {
  if (stack_.empty()) return;
  switch (stack_.back()) {
    case State::kKey:
      stack_.pop_back();
      break;
    case State::kListEmpty:
      stack_.back() = State::kListSome;
      break;
    case State::kListSome:
      out_ += ',';
      break;
    default:
      throw std::logic_error("JsonWriter: a value inside an object needs a key first");
  }
}

void JsonWriter::beginObject() {
  beforeValue();
  out_ += '{';
  stack_.push_back(State::kObjectEmpty);
}

void JsonWriter::endObject() {
  if (stack_.empty() ||
      (stack_.back() != State::kObjectEmpty && stack_.back() != State::kObjectSome))
    throw std::logic_error("JsonWriter: endObject outside an object");
  stack_.pop_back();
  out_ += '}';
}

void JsonWriter::beginList() {
  beforeValue();
  out_ += '[';
  stack_.push_back(State::kListEmpty);
}

void JsonWriter::endList() {
  if (stack_.empty() || (stack_.back() != State::kListEmpty && stack_.back() != State::kListSome))
    throw std::logic_error("JsonWriter: endList outside a list");
  stack_.pop_back();
  out_ += ']';
}

void JsonWriter::key(std::string_view name) {
  if (stack_.empty()) throw std::logic_error("JsonWriter: key outside an object");
  if (stack_.back() == State::kObjectEmpty) {
    stack_.back() = State::kObjectSome;
  } else if (stack_.back() == State::kObjectSome) {
    out_ += ',';
  } else {
    throw std::logic_error("JsonWriter: key outside an object");
  }
  out_ += jsonQuote(name);
  out_ += ':';
  stack_.push_back(State::kKey);
}

void JsonWriter::str(std::string_view value) {
  beforeValue();
  out_ += jsonQuote(value);
}

void JsonWriter::integer(long long value) {
  beforeValue();
  out_ += std::to_string(value);
}

void JsonWriter::size(size_t value) {
  beforeValue();
  out_ += std::to_string(value);
}

void JsonWriter::number(double value) {
  beforeValue();
  if (value != value) {
    out_ += "\"nan\"";
    return;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%lf", value);
  out_ += buf;
}

void JsonWriter::null() {
  beforeValue();
  out_ += "null";
}

void JsonWriter::boolString(bool value) { str(value ? "true" : "false"); }

void JsonWriter::closeTo(size_t depth) {
  while (stack_.size() > depth) {
    switch (stack_.back()) {
      case State::kKey:
        null();
        break;
      case State::kObjectEmpty:
      case State::kObjectSome:
        endObject();
        break;
      default:
        endList();
        break;
    }
  }
}

std::string JsonWriter::drain() {
  std::string s;
  s.swap(out_);
  return s;
}

}  // namespace loomperf
