// A small, strict XML reader for topology files: elements, attributes, comments, the XML
// declaration and whitespace between elements. That is all NCCL's topology format (and the
// first look at any topology file, to tell the formats apart) needs; hwloc XML itself is read
// by hwloc. No DTDs, CDATA, processing instructions beyond `<?xml ...?>`, or text content:
// each is an error naming the file and line, so a malformed file is never half-read.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace loom::topo {

struct XmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;  // in file order, entities decoded
  std::vector<std::unique_ptr<XmlElement>> children;
  int line = 0;  // where the start tag begins (1-based), for messages

  // The attribute's value, or nullptr when absent.
  const std::string* attr(const std::string& key) const;
};

// Parses `text`, the whole content of `fileName` (named in messages). Throws InvalidArgument
// "topology file 'F' line N: what is wrong" on malformed input.
std::unique_ptr<XmlElement> parseXml(const std::string& text, const std::string& fileName);

// The name of the first element of `text` ("system", "topology"), skipping the declaration,
// comments and a DOCTYPE; "" when there is none. Does not check the rest of the document.
std::string xmlRootName(const std::string& text);

}  // namespace loom::topo
