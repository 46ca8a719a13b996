// The ib transport's pure parts: LOOM_IB_HCA's parser, the RoCE GID choice, the verbs table's
// fill routine and the port choice. No RDMA device needed.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "src/base/error.h"
#include "transports/ib/ib_devices.h"
#include "transports/ib/ib_hca_filter.h"
#include "transports/ib/ib_verbs.h"

namespace loom::transport::ib {
namespace {

TEST(IbHcaFilter, EmptyAcceptsEverything) {
  HcaFilter f("");
  EXPECT_TRUE(f.empty());
  EXPECT_TRUE(f.accepts("mlx5_0", 1));
  EXPECT_TRUE(f.accepts("rxe0", 2));
}

TEST(IbHcaFilter, PrefixList) {
  HcaFilter f("mlx5_0,mlx4");
  EXPECT_TRUE(f.accepts("mlx5_0", 1));
  EXPECT_TRUE(f.accepts("mlx5_01", 1));  // a prefix, as NCCL
  EXPECT_TRUE(f.accepts("mlx4_3", 2));
  EXPECT_FALSE(f.accepts("mlx5_1", 1));
  EXPECT_FALSE(f.accepts("rxe0", 1));
}

TEST(IbHcaFilter, Ports) {
  HcaFilter f("mlx5_0:1, mlx5_1");
  EXPECT_TRUE(f.accepts("mlx5_0", 1));
  EXPECT_FALSE(f.accepts("mlx5_0", 2));
  EXPECT_TRUE(f.accepts("mlx5_1", 2));
}

TEST(IbHcaFilter, Exact) {
  HcaFilter f("=mlx5_0,mlx5_1:2");
  EXPECT_TRUE(f.accepts("mlx5_0", 1));
  EXPECT_FALSE(f.accepts("mlx5_01", 1));
  EXPECT_TRUE(f.accepts("mlx5_1", 2));
  EXPECT_FALSE(f.accepts("mlx5_1", 1));
}

TEST(IbHcaFilter, Exclude) {
  HcaFilter f("^mlx5_3,mlx5_0:2");
  EXPECT_TRUE(f.excludes());
  EXPECT_FALSE(f.accepts("mlx5_3", 1));
  EXPECT_FALSE(f.accepts("mlx5_30", 1));
  EXPECT_FALSE(f.accepts("mlx5_0", 2));
  EXPECT_TRUE(f.accepts("mlx5_0", 1));
  EXPECT_TRUE(f.accepts("mlx5_1", 1));
}

TEST(IbHcaFilter, ExcludeExact) {
  HcaFilter f("^=mlx5_3");
  EXPECT_FALSE(f.accepts("mlx5_3", 1));
  EXPECT_TRUE(f.accepts("mlx5_30", 1));
}

TEST(IbHcaFilter, MalformedEntriesSayWhat) {
  for (const char* bad : {":1", "mlx5_0:", "mlx5_0:x", "mlx5_0:0", "mlx5_0:256", "^", "=", "^="}) {
    try {
      HcaFilter f(bad);
      ADD_FAILURE() << "accepted LOOM_IB_HCA=" << bad;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("LOOM_IB_HCA"), std::string::npos) << e.what();
    }
  }
}

GidEntry gid(int index, const char* type, std::initializer_list<uint8_t> tail, bool v4 = false) {
  GidEntry e;
  e.index = index;
  e.type = type;
  if (v4) {
    e.gid.raw[10] = 0xff;
    e.gid.raw[11] = 0xff;
  }
  int i = 16 - static_cast<int>(tail.size());
  for (uint8_t b : tail) e.gid.raw[i++] = b;
  return e;
}

GidEntry linkLocal(int index, const char* type) {
  GidEntry e = gid(index, type, {1, 2, 3, 4});
  e.gid.raw[0] = 0xfe;
  e.gid.raw[1] = 0x80;
  return e;
}

TEST(IbGidChoice, PrefersRoceV2WithIpv4) {
  std::vector<GidEntry> table{linkLocal(0, "IB/RoCE v1"), linkLocal(1, "RoCE v2"),
                              gid(2, "IB/RoCE v1", {10, 0, 0, 1}, true),
                              gid(3, "RoCE v2", {10, 0, 0, 1}, true)};
  EXPECT_EQ(chooseGidIndex(table), 3);
}

TEST(IbGidChoice, RoceV2NotLinkLocalThenAnyV2) {
  GidEntry global = gid(2, "RoCE v2", {9, 9});
  global.gid.raw[0] = 0x20;  // 2000::/3
  EXPECT_EQ(chooseGidIndex({linkLocal(0, "IB/RoCE v1"), linkLocal(1, "RoCE v2"), global}), 2);
  EXPECT_EQ(chooseGidIndex({linkLocal(0, "IB/RoCE v1"), linkLocal(1, "RoCE v2")}), 1);
}

TEST(IbGidChoice, UntypedTablesTakeTheFirstNonZero) {
  EXPECT_EQ(chooseGidIndex({gid(0, "", {}), gid(1, "", {7})}), 1);
  EXPECT_EQ(chooseGidIndex({gid(0, "", {})}), -1);
  EXPECT_EQ(chooseGidIndex({}), -1);
  // Only RoCE v1 entries: not routable RoCE v2, so none.
  EXPECT_EQ(chooseGidIndex({gid(0, "IB/RoCE v1", {1})}), -1);
}

int fakeFunction() { return 0; }

TEST(IbVerbsTable, FillsFromAnyResolverAndNamesWhatIsMissing) {
  std::map<std::string, int> asked;
  Verbs all = fillVerbs(
      [&](const char* name, const char* version) -> void* {
        asked[name] += 1;
        if (std::string(name) == "ibv_reg_dmabuf_mr") EXPECT_STREQ(version, "IBVERBS_1.12");
        return reinterpret_cast<void*>(&fakeFunction);
      },
      "fake");
  EXPECT_TRUE(all.usable()) << all.error;
  EXPECT_NE(all.regDmabufMr, nullptr);
  EXPECT_NE(all.postSend, nullptr);  // the ops-table entries are always there
  EXPECT_EQ(asked["ibv_create_qp"], 1);

  Verbs some = fillVerbs(
      [](const char* name, const char*) -> void* {
        const std::string n = name;
        if (n == "ibv_create_qp" || n == "ibv_reg_mr_iova2" || n == "ibv_reg_dmabuf_mr")
          return nullptr;
        return reinterpret_cast<void*>(&fakeFunction);
      },
      "partial");
  EXPECT_FALSE(some.usable());
  EXPECT_NE(some.error.find("ibv_create_qp"), std::string::npos) << some.error;
  EXPECT_EQ(some.error.find("dmabuf"), std::string::npos) << "optional entries are not required";
  EXPECT_EQ(some.regDmabufMr, nullptr);
}

TEST(IbVerbsTable, MissingLibraryIsAReasonNotACrash) {
  Verbs v = loadVerbs("/nonexistent/libibverbs.so.1");
  EXPECT_FALSE(v.usable());
  EXPECT_NE(v.error.find("cannot load /nonexistent/libibverbs.so.1"), std::string::npos) << v.error;
}

TEST(IbPortChoice, TheTopologysNicElseSpread) {
  std::vector<IbPort> ports(3);
  ports[0].deviceName = "mlx5_0";
  ports[1].deviceName = "mlx5_1";
  ports[2].deviceName = "mlx5_1";  // its second port
  ports[2].port = 2;
  EXPECT_EQ(choosePort(ports, "mlx5_1", 0), 1);
  EXPECT_EQ(choosePort(ports, "mlx5_0", 2), 0);
  EXPECT_EQ(choosePort(ports, "", 0), 0);
  EXPECT_EQ(choosePort(ports, "", 4), 1);
  EXPECT_EQ(choosePort(ports, "eth0", 5), 2);  // a NIC without an RDMA port: spread
  EXPECT_EQ(choosePort({}, "mlx5_0", 0), -1);
}

}  // namespace
}  // namespace loom::transport::ib
