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

// NCCL-format files (root <system>): the message names the file and the line.
std::string ncclError(const std::string& xml) {
  TempFile file(xml);
  std::string message = loadError(file.path());
  EXPECT_TRUE(contains(message, "topology file '" + file.path() + "' line ")) << message;
  return message;
}

TEST(TopoLoadError, NcclXmlWithAMismatchedEndTagNamesBothLines) {
  std::string message = ncclError("<system version=\"1\">\n  <cpu numaid=\"0\">\n</system>\n");
  EXPECT_TRUE(contains(message, "line 3: </system> closes <cpu> (opened on line 2)")) << message;
}

TEST(TopoLoadError, NcclXmlCutShort) {
  std::string message = ncclError("<system version=\"1\">\n  <cpu numaid=\"0\" affinity=\"ff");
  EXPECT_TRUE(contains(message, "line 2: an attribute value is not closed")) << message;
}

TEST(TopoLoadError, NcclXmlWithAMissingRequiredAttribute) {
  std::string message = ncclError(
      "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci class=\"0x030200\"/>\n  "
      "</cpu>\n</system>\n");
  EXPECT_TRUE(contains(message, "line 3: <pci> has no 'busid' attribute")) << message;
}

TEST(TopoLoadError, NcclXmlWithBadValues) {
  std::string head = "<system version=\"1\">\n  <cpu numaid=\"0\" affinity=\"ff\">\n";
  std::string tail = "  </cpu>\n</system>\n";
  EXPECT_TRUE(contains(ncclError(head + "    <pci busid=\"07:00\" class=\"0x030200\"/>\n" + tail),
                       "line 3: '07:00' is not a PCI bus id"));
  EXPECT_TRUE(contains(ncclError("<system>\n<cpu numaid=\"0\" affinity=\"zz\"/>\n</system>"),
                       "line 2: affinity 'zz' is not a cpumask"));
  EXPECT_TRUE(contains(
      ncclError(head +
                "    <pci busid=\"0000:07:00.0\" class=\"0x030200\">\n"
                "      <gpu dev=\"0\" sm=\"80\"><nvlink target=\"0000:08:00.0\" count=\"4\" "
                "tclass=\"0x030200\"/></gpu>\n    </pci>\n" +
                tail),
      "line 4: <nvlink target=\"0000:08:00.0\"> is not a GPU of this file"));
  EXPECT_TRUE(
      contains(ncclError(head + "    <pci busid=\"0000:07:00.0\" class=\"0x0302zz\"/>\n" + tail),
               "line 3: <pci class=\"0x0302zz\">: not a number"));
  EXPECT_TRUE(contains(ncclError(head + "    text\n" + tail), "line 3: text inside <cpu>"));
  EXPECT_TRUE(contains(ncclError("<system>\n</system>\n<system/>\n"), "line 3: a second root"));
  EXPECT_TRUE(contains(ncclError("<system>\n</system>\n"), "line 1: <system> holds no <cpu>"));
}

TEST(TopoLoadError, NeitherFormatNamesBothRoots) {
  TempFile file("<?xml version=\"1.0\"?>\n<graphs/>\n");
  std::string message = loadError(file.path());
  EXPECT_TRUE(contains(message, file.path())) << message;
  EXPECT_TRUE(contains(message, "no <topology> element (hwloc XML) nor a <system> root"))
      << message;
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
