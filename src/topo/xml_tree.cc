// The strict XML subset reader: a recursive descent over the text with a line counter.
#include "src/topo/xml_tree.h"

#include <cctype>
#include <cstring>

#include "src/base/error.h"

namespace loom::topo {
namespace {

constexpr int kMaxDepth = 64;  // topology files nest a handful of PCI bridges deep

bool isNameStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}
bool isNameChar(char c) {
  return isNameStart(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.';
}
bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

class Parser {
 public:
  Parser(const std::string& text, const std::string& file) : text_(text), file_(file) {}

  std::unique_ptr<XmlElement> document() {
    if (startsWith("\xEF\xBB\xBF")) pos_ += 3;  // a UTF-8 byte order mark
    skipMisc();
    if (startsWith("<?xml")) {
      skipPast("?>", "the XML declaration is not closed with '?>'");
      skipMisc();
    }
    if (pos_ >= text_.size()) fail("no root element (the file holds no XML element)");
    if (startsWith("<!DOCTYPE")) fail("a DOCTYPE is not supported in this format");
    if (text_[pos_] != '<') fail("text before the root element");
    std::unique_ptr<XmlElement> root = element(0);
    skipMisc();
    if (pos_ < text_.size())
      fail(startsWith("<") ? "a second root element; a file holds one"
                           : "text after the root "
                             "element");
    return root;
  }

 private:
  int lineAt(size_t at) const {
    int line = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) line += text_[i] == '\n';
    return line;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument(strCat("topology file '", file_, "' line ", lineAt(pos_), ": ", what));
  }

  bool startsWith(const char* s) const { return text_.compare(pos_, std::strlen(s), s) == 0; }

  void skipPast(const char* end, const char* error) {
    size_t at = text_.find(end, pos_);
    if (at == std::string::npos) fail(error);
    pos_ = at + std::strlen(end);
  }

  // Whitespace and comments.
  void skipMisc() {
    for (;;) {
      while (pos_ < text_.size() && isSpace(text_[pos_])) ++pos_;
      if (!startsWith("<!--")) return;
      pos_ += 4;
      size_t end = text_.find("--", pos_);
      if (end == std::string::npos) fail("a comment is not closed with '-->'");
      pos_ = end;
      if (!startsWith("-->")) fail("'--' inside a comment");
      pos_ += 3;
    }
  }

  std::string name(const char* what) {
    if (pos_ >= text_.size() || !isNameStart(text_[pos_])) fail(strCat("expected ", what, " name"));
    size_t start = pos_;
    while (pos_ < text_.size() && isNameChar(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  // A quoted attribute value with the five predefined entities and numeric references.
  std::string value() {
    if (pos_ >= text_.size() || (text_[pos_] != '"' && text_[pos_] != '\''))
      fail("expected a quoted attribute value");
    char quote = text_[pos_++];
    std::string out;
    for (;;) {
      if (pos_ >= text_.size()) fail("an attribute value is not closed");
      char c = text_[pos_];
      if (c == quote) break;
      if (c == '<') fail("'<' inside an attribute value");
      if (c != '&') {
        out += c;
        ++pos_;
        continue;
      }
      size_t semi = text_.find(';', pos_);
      if (semi == std::string::npos || semi - pos_ > 10) fail("an '&' without an entity");
      std::string entity = text_.substr(pos_ + 1, semi - pos_ - 1);
      if (entity == "amp")
        out += '&';
      else if (entity == "lt")
        out += '<';
      else if (entity == "gt")
        out += '>';
      else if (entity == "quot")
        out += '"';
      else if (entity == "apos")
        out += '\'';
      else if (entity.size() > 1 && entity[0] == '#') {
        bool hex = entity[1] == 'x';
        long code = std::strtol(entity.c_str() + (hex ? 2 : 1), nullptr, hex ? 16 : 10);
        if (code <= 0 || code > 127) fail(strCat("unsupported character reference &", entity, ";"));
        out += static_cast<char>(code);
      } else {
        fail(strCat("unknown entity &", entity, ";"));
      }
      pos_ = semi + 1;
    }
    ++pos_;
    return out;
  }

  std::unique_ptr<XmlElement> element(int depth) {
    if (depth >= kMaxDepth) fail(strCat("elements nest deeper than ", kMaxDepth));
    auto element = std::make_unique<XmlElement>();
    size_t start = pos_;
    ++pos_;  // '<'
    element->name = name("an element");
    element->line = lineAt(start);
    for (;;) {
      bool spaced = false;
      while (pos_ < text_.size() && isSpace(text_[pos_])) {
        ++pos_;
        spaced = true;
      }
      if (pos_ >= text_.size()) fail(strCat("<", element->name, "> is not closed"));
      if (startsWith("/>")) {
        pos_ += 2;
        return element;
      }
      if (text_[pos_] == '>') {
        ++pos_;
        break;
      }
      if (!spaced) fail(strCat("expected whitespace, '>' or '/>' in <", element->name, ">"));
      std::string key = name("an attribute");
      while (pos_ < text_.size() && isSpace(text_[pos_])) ++pos_;
      if (pos_ >= text_.size() || text_[pos_] != '=')
        fail(strCat("attribute '", key, "' of <", element->name, "> has no '=value'"));
      ++pos_;
      while (pos_ < text_.size() && isSpace(text_[pos_])) ++pos_;
      if (element->attr(key) != nullptr)
        fail(strCat("attribute '", key, "' appears twice in <", element->name, ">"));
      element->attrs.emplace_back(key, value());
    }
    // Content: child elements, comments, whitespace; then the matching end tag.
    for (;;) {
      skipMisc();
      if (pos_ >= text_.size()) fail(strCat("<", element->name, "> is never closed"));
      if (startsWith("</")) {
        pos_ += 2;
        std::string end = name("an end tag");
        if (end != element->name)
          fail(strCat("</", end, "> closes <", element->name, "> (opened on line ", element->line,
                      ")"));
        while (pos_ < text_.size() && isSpace(text_[pos_])) ++pos_;
        if (pos_ >= text_.size() || text_[pos_] != '>') fail(strCat("</", end, "> is not closed"));
        ++pos_;
        return element;
      }
      if (startsWith("<![CDATA[")) fail("CDATA is not supported in this format");
      if (startsWith("<?") || startsWith("<!")) fail("unexpected markup inside an element");
      if (text_[pos_] != '<')
        fail(strCat("text inside <", element->name, ">; only elements belong there"));
      element->children.push_back(this->element(depth + 1));
    }
  }

  const std::string& text_;
  const std::string& file_;
  size_t pos_ = 0;
};

}  // namespace

const std::string* XmlElement::attr(const std::string& key) const {
  for (const auto& [k, v] : attrs)
    if (k == key) return &v;
  return nullptr;
}

std::unique_ptr<XmlElement> parseXml(const std::string& text, const std::string& fileName) {
  return Parser(text, fileName).document();
}

std::string xmlRootName(const std::string& text) {
  size_t pos = 0;
  for (;;) {
    pos = text.find('<', pos);
    if (pos == std::string::npos || pos + 1 >= text.size()) return "";
    if (text.compare(pos, 4, "<!--") == 0) {
      pos = text.find("-->", pos + 4);
      if (pos == std::string::npos) return "";
      continue;
    }
    if (text[pos + 1] == '?' || text[pos + 1] == '!') {  // declaration, DOCTYPE
      ++pos;
      continue;
    }
    size_t end = pos + 1;
    while (end < text.size() && isNameChar(text[end])) ++end;
    return text.substr(pos + 1, end - pos - 1);
  }
}

}  // namespace loom::topo
