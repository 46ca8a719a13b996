// Bad topology files give a loom InvalidArgument naming the file and the reason; none crashes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "src/base/error.h"
#include "src/topo/discovery.h"
#include "tests/test_util.h"

namespace loom::topo {
namespace {

using loom::test::contains;
using loom::test::messageOf;

const std::string kPower8 =
    std::string(LOOM_TOPO_FIXTURES) + "/ibm-power8-p100x4-nvlink.hwloc-power8gpudistances.xml";

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A file in the test's temporary directory, removed at the end of the scope.
class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    path_ = testing::TempDir() + "loom_topo_" + std::to_string(getpid()) + "_" +
            std::to_string(counter_++) + ".xml";
    std::ofstream(path_) << content;
  }
  ~TempFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

std::string loadError(const std::string& path) {
  return messageOf<InvalidArgument>([&] { loadXmlFile(path); });
}

TEST(TopoLoadError, MissingFileNamesItAndTheSystemReason) {
  std::string message = loadError("/nonexistent/dir/topo.xml");
  EXPECT_TRUE(contains(message, "'/nonexistent/dir/topo.xml'")) << message;
  EXPECT_TRUE(contains(message, "No such file or directory")) << message;
}

TEST(TopoLoadError, EmptyFile) {
  TempFile file("");
  std::string message = loadError(file.path());
  EXPECT_TRUE(contains(message, file.path())) << message;
  EXPECT_TRUE(contains(message, "is empty")) << message;
}

TEST(TopoLoadError, NotXmlAtAll) {
  TempFile file("<notxml");
  std::string message = loadError(file.path());
  EXPECT_TRUE(contains(message, file.path())) << message;
  EXPECT_TRUE(contains(message, "no <topology> element")) << message;
}

TEST(TopoLoadError, TruncatedXmlIsRejectedByHwloc) {
  std::string xml = readFile(kPower8);
  ASSERT_GT(xml.size(), 3000u);
  TempFile file(xml.substr(0, 3000));  // cut inside an attribute
  std::string message = loadError(file.path());
  EXPECT_TRUE(contains(message, file.path())) << message;
  EXPECT_TRUE(contains(message, "hwloc")) << message;
}

TEST(TopoLoadError, MalformedObjectIsRejectedByHwloc) {
  std::string xml = readFile(kPower8);
  size_t at = xml.find("type=\"Package\"");
  ASSERT_NE(at, std::string::npos);
  xml.replace(at, 14, "type=\"NoSuchType\"");
  TempFile file(xml);
  std::string message = loadError(file.path());
  EXPECT_TRUE(contains(message, file.path())) << message;
  EXPECT_TRUE(contains(message, "hwloc")) << message;
}

TEST(TopoLoadError, Hwloc3XmlSaysWhichVersionAndWhatToDo) {
  std::string xml = readFile(kPower8);
  size_t at = xml.find("<topology version=\"2.0\"");
  ASSERT_NE(at, std::string::npos);
  xml.replace(at, 23, "<topology version=\"3.0\"");
  TempFile file(xml);
  std::string message = loadError(file.path());
  EXPECT_TRUE(contains(message, file.path())) << message;
  EXPECT_TRUE(contains(message, "version 3.0")) << message;
  EXPECT_TRUE(contains(message, "hwloc 2.x")) << message;
}

TEST(TopoLoadError, TheSameFileLoadsAfterTheErrors) {
  EXPECT_EQ(loadXmlFile(kPower8)->node().gpus.size(), 4u);
  // And round-trips through hwloc's own export.
  auto again = loadXmlText(loadXmlFile(kPower8)->exportXml(), "export");
  EXPECT_EQ(again->node().gpus.size(), 4u);
  EXPECT_DOUBLE_EQ(again->node().nvlink(0, 1), 40.0);
}

}  // namespace
}  // namespace loom::topo
