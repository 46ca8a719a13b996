// Unit tests of loom's pure parsers: string helpers, the logger's settings, environment
// variables, interface selection (LOOM_SOCKET_IFNAME / LOOM_SOCKET_FAMILY) and address parsing.
// No network traffic: addresses are numeric (no DNS) except "localhost", which /etc/hosts
// resolves.
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "src/base/env.h"
#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/base/strings.h"
#include "src/net/net_if.h"
#include "src/net/socket.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using test::ScopedEnv;

using test::contains;
using test::messageOf;

// Unsets an environment variable for the scope (ScopedEnv can only set one).
class ScopedUnsetEnv {
 public:
  explicit ScopedUnsetEnv(const char* name) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    unsetenv(name);
  }
  ~ScopedUnsetEnv() {
    if (old_) setenv(name_.c_str(), old_->c_str(), 1);
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// ---- strings.h ----------------------------------------------------------------------------

TEST(Strings, StrCatConcatenatesMixedTypes) {
  EXPECT_EQ(strCat("rank ", 3, " of ", 8), "rank 3 of 8");
  EXPECT_EQ(strCat(std::string("a"), 'b', -7, "c"), "ab-7c");
  EXPECT_EQ(strCat("only"), "only");
}

TEST(Strings, SplitListTrimsAndDropsEmptyPieces) {
  using V = std::vector<std::string>;
  EXPECT_EQ(splitList("a,b,c", ','), (V{"a", "b", "c"}));
  EXPECT_EQ(splitList("  eth0 , ib1 ,,  ", ','), (V{"eth0", "ib1"}));
  EXPECT_EQ(splitList(",,,", ','), V{});
  EXPECT_EQ(splitList("", ','), V{});
  EXPECT_EQ(splitList("   ", ','), V{});
  EXPECT_EQ(splitList("single", ','), V{"single"});
  EXPECT_EQ(splitList("x;y z;", ';'), (V{"x", "y z"}));  // inner spaces are kept
  EXPECT_EQ(splitList("a,b", ';'), V{"a,b"});
}

TEST(Strings, JoinInts) {
  EXPECT_EQ(joinInts({}), "");
  EXPECT_EQ(joinInts({7}), "7");
  EXPECT_EQ(joinInts({1, 3, 5}), "1, 3, 5");
  EXPECT_EQ(joinInts({-1, 0}), "-1, 0");
}

// ---- logging.h ----------------------------------------------------------------------------

TEST(Logger, ParseLevelAcceptsEveryLevelInAnyCase) {
  EXPECT_EQ(Logger::parseLevel("NONE"), LogLevel::kNone);
  EXPECT_EQ(Logger::parseLevel("VERSION"), LogLevel::kVersion);
  EXPECT_EQ(Logger::parseLevel("WARN"), LogLevel::kWarn);
  EXPECT_EQ(Logger::parseLevel("INFO"), LogLevel::kInfo);
  EXPECT_EQ(Logger::parseLevel("TRACE"), LogLevel::kTrace);
  EXPECT_EQ(Logger::parseLevel("none"), LogLevel::kNone);
  EXPECT_EQ(Logger::parseLevel("Version"), LogLevel::kVersion);
  EXPECT_EQ(Logger::parseLevel("info"), LogLevel::kInfo);
  EXPECT_EQ(Logger::parseLevel("tRaCe"), LogLevel::kTrace);
}

TEST(Logger, ParseLevelRejectsUnknownNames) {
  EXPECT_THROW(Logger::parseLevel("DEBUG"), InvalidArgument);
  EXPECT_THROW(Logger::parseLevel(""), InvalidArgument);
  EXPECT_THROW(Logger::parseLevel("3"), InvalidArgument);
  EXPECT_THROW(Logger::parseLevel("WARNING"), InvalidArgument);
  std::string msg = messageOf<InvalidArgument>([] { Logger::parseLevel("loud"); });
  EXPECT_TRUE(contains(msg, "loud")) << msg;
  EXPECT_TRUE(contains(msg, "LOOM_DEBUG")) << msg;
}

TEST(Logger, ParseSubsysLists) {
  EXPECT_EQ(Logger::parseSubsys("INIT"), static_cast<uint32_t>(kLogInit));
  EXPECT_EQ(Logger::parseSubsys("INIT,NET"), static_cast<uint32_t>(kLogInit | kLogNet));
  EXPECT_EQ(Logger::parseSubsys(" init , bootstrap ,coll"),
            static_cast<uint32_t>(kLogInit | kLogBootstrap | kLogColl));
  EXPECT_EQ(Logger::parseSubsys("ENV,TUNING,GRAPH,P2P,SHM"),
            static_cast<uint32_t>(kLogEnv | kLogTuning | kLogGraph | kLogP2p | kLogShm));
  EXPECT_EQ(Logger::parseSubsys("ALL"), static_cast<uint32_t>(kLogAll));
  EXPECT_EQ(Logger::parseSubsys("all"), static_cast<uint32_t>(kLogAll));
  EXPECT_EQ(Logger::parseSubsys("NET,ALL"), static_cast<uint32_t>(kLogAll));
}

TEST(Logger, ParseSubsysExclusionGivesComplement) {
  EXPECT_EQ(Logger::parseSubsys("^NET"), ~static_cast<uint32_t>(kLogNet));
  EXPECT_EQ(Logger::parseSubsys("^INIT,COLL"), ~static_cast<uint32_t>(kLogInit | kLogColl));
  EXPECT_EQ(Logger::parseSubsys("^ALL"), 0u);
  uint32_t mask = Logger::parseSubsys("^bootstrap");
  EXPECT_EQ(mask & kLogBootstrap, 0u);
  EXPECT_NE(mask & kLogInit, 0u);
  EXPECT_NE(mask & kLogEnv, 0u);
}

TEST(Logger, ParseSubsysRejectsUnknownNames) {
  EXPECT_THROW(Logger::parseSubsys("FOO"), InvalidArgument);
  EXPECT_THROW(Logger::parseSubsys("INIT,FOO"), InvalidArgument);
  EXPECT_THROW(Logger::parseSubsys("^NETWORK"), InvalidArgument);
  std::string msg = messageOf<InvalidArgument>([] { Logger::parseSubsys("INIT,bogus"); });
  EXPECT_TRUE(contains(msg, "BOGUS")) << msg;
  EXPECT_TRUE(contains(msg, "LOOM_DEBUG_SUBSYS")) << msg;
}

TEST(Logger, ExpandFilePattern) {
  EXPECT_EQ(Logger::expandFilePattern("/tmp/loom.%h.%p.log", "node7", 4242),
            "/tmp/loom.node7.4242.log");
  EXPECT_EQ(Logger::expandFilePattern("%h-%h/%p-%p", "a", 1), "a-a/1-1");
  EXPECT_EQ(Logger::expandFilePattern("plain.log", "h", 9), "plain.log");
  EXPECT_EQ(Logger::expandFilePattern("", "h", 9), "");
  // A trailing % and unknown escapes are kept as they are.
  EXPECT_EQ(Logger::expandFilePattern("log%", "h", 9), "log%");
  EXPECT_EQ(Logger::expandFilePattern("%x%p", "h", 9), "%x9");
  EXPECT_EQ(Logger::expandFilePattern("%p%", "h", 12), "12%");
}

// ---- env.h --------------------------------------------------------------------------------

TEST(Env, EnvIntParsesAndRejectsMalformedValues) {
  {
    ScopedUnsetEnv unset("LOOM_TIMEOUT");
    EXPECT_FALSE(envIsSet(EnvVar::LOOM_TIMEOUT));
    EXPECT_EQ(envInt(EnvVar::LOOM_TIMEOUT), 300);  // the documented default
  }
  {
    ScopedEnv env("LOOM_TIMEOUT", "42");
    EXPECT_TRUE(envIsSet(EnvVar::LOOM_TIMEOUT));
    EXPECT_EQ(envInt(EnvVar::LOOM_TIMEOUT), 42);
  }
  {
    ScopedEnv env("LOOM_TIMEOUT", "-7");
    EXPECT_EQ(envInt(EnvVar::LOOM_TIMEOUT), -7);
  }
  for (const char* bad : {"abc", "12x", "1.5", "99999999999999999999999"}) {
    ScopedEnv env("LOOM_TIMEOUT", bad);
    std::string msg = messageOf<InvalidArgument>([] { envInt(EnvVar::LOOM_TIMEOUT); });
    EXPECT_TRUE(contains(msg, "LOOM_TIMEOUT")) << bad << ": " << msg;
    EXPECT_TRUE(contains(msg, bad)) << bad << ": " << msg;
  }
}

TEST(Env, EnvStringDefaultVersusSet) {
  {
    ScopedUnsetEnv unset("LOOM_HOSTID");
    EXPECT_EQ(envString(EnvVar::LOOM_HOSTID), "");
    EXPECT_FALSE(envIsSet(EnvVar::LOOM_HOSTID));
  }
  {
    ScopedUnsetEnv unset("LOOM_DEBUG_SUBSYS");
    EXPECT_EQ(envString(EnvVar::LOOM_DEBUG_SUBSYS), "ALL");
  }
  {
    ScopedEnv env("LOOM_DEBUG_SUBSYS", "");  // set but empty counts as unset
    EXPECT_EQ(envString(EnvVar::LOOM_DEBUG_SUBSYS), "ALL");
    EXPECT_FALSE(envIsSet(EnvVar::LOOM_DEBUG_SUBSYS));
  }
  {
    ScopedEnv env("LOOM_HOSTID", "fake-host-3");
    EXPECT_EQ(envString(EnvVar::LOOM_HOSTID), "fake-host-3");
    EXPECT_TRUE(envIsSet(EnvVar::LOOM_HOSTID));
  }
}

TEST(Env, SpecsAndMarkdownTableCoverEveryVariable) {
  struct Row {
    EnvVar var;
    const char* name;
    const char* def;
  };
  // Derived from the one table, so a new variable is covered without editing this test.
  const Row rows[] = {
#define LOOM_ENV(name, def, doc) {EnvVar::name, #name, def},
#include "src/base/env_vars.def"
#undef LOOM_ENV
  };
  ASSERT_EQ(sizeof(rows) / sizeof(rows[0]), static_cast<size_t>(EnvVar::kCount));
  std::string table = envTableMarkdown();
  for (const Row& row : rows) {
    EXPECT_STREQ(envSpec(row.var).name, row.name);
    EXPECT_STREQ(envSpec(row.var).defaultValue, row.def);
    EXPECT_GT(std::string(envSpec(row.var).description).size(), 0u) << row.name;
    EXPECT_TRUE(contains(table, strCat("`", row.name, "`"))) << row.name << " missing from\n"
                                                             << table;
  }
}

// ---- net_if.h: InterfaceFilter ------------------------------------------------------------

TEST(InterfaceFilter, PrefixList) {
  InterfaceFilter f("eth,ib");
  EXPECT_FALSE(f.empty());
  EXPECT_TRUE(f.matches("eth0"));
  EXPECT_TRUE(f.matches("eth12"));
  EXPECT_TRUE(f.matches("ib1"));
  EXPECT_FALSE(f.matches("lo"));
  EXPECT_FALSE(f.matches("docker0"));
  EXPECT_FALSE(f.matches("et"));  // shorter than the prefix
  EXPECT_TRUE(InterfaceFilter(" eth , ib ").matches("ib0"));
}

TEST(InterfaceFilter, CaretExcludes) {
  InterfaceFilter f("^docker,lo");
  EXPECT_FALSE(f.matches("docker0"));
  EXPECT_FALSE(f.matches("lo"));
  EXPECT_TRUE(f.matches("eth0"));
  EXPECT_TRUE(f.matches("ib0"));
}

TEST(InterfaceFilter, EqualsMatchesExactNames) {
  InterfaceFilter f("=eth0");
  EXPECT_TRUE(f.matches("eth0"));
  EXPECT_FALSE(f.matches("eth01"));
  EXPECT_FALSE(f.matches("eth"));
  EXPECT_FALSE(f.matches("eth1"));
  InterfaceFilter two("=eth0,ib0");
  EXPECT_TRUE(two.matches("ib0"));
  EXPECT_FALSE(two.matches("ib01"));
}

TEST(InterfaceFilter, CaretEqualsExcludesExactNames) {
  InterfaceFilter f("^=lo");
  EXPECT_FALSE(f.matches("lo"));
  EXPECT_TRUE(f.matches("lo2"));  // exact: only "lo" itself is excluded
  EXPECT_TRUE(f.matches("eth0"));
}

TEST(InterfaceFilter, EmptyMatchesEverything) {
  InterfaceFilter f("");
  EXPECT_TRUE(f.empty());
  EXPECT_TRUE(f.matches("lo"));
  EXPECT_TRUE(f.matches("eth0"));
  EXPECT_TRUE(f.matches("docker0"));
  EXPECT_TRUE(InterfaceFilter(" , ").empty());
}

// ---- net_if.h: chooseInterface ------------------------------------------------------------

NetInterface itf(const std::string& name, const std::string& address) {
  return NetInterface{name, SocketAddress::parse(address)};
}

std::string addrOnly(const NetInterface& i) { return i.address.toString(); }

// IPv6 first and the good IPv4 interface last, so order alone does not pick it.
std::vector<NetInterface> typicalHost() {
  return {itf("lo", "127.0.0.1:0"), itf("lo", "[::1]:0"), itf("eth0", "[2001:db8::5]:0"),
          itf("docker0", "172.17.0.1:0"), itf("eth1", "10.1.2.3:0")};
}

TEST(ChooseInterface, DefaultPrefersNonLoopbackNonDockerIpv4) {
  NetInterface c = chooseInterface(typicalHost(), "", "", nullptr);
  EXPECT_EQ(c.name, "eth1");
  EXPECT_EQ(addrOnly(c), "10.1.2.3:0");
}

TEST(ChooseInterface, DefaultTakesIpv6WhenNoOtherIpv4) {
  std::vector<NetInterface> cands = {itf("lo", "127.0.0.1:0"), itf("docker0", "172.17.0.1:0"),
                                     itf("eth0", "[2001:db8::5]:0")};
  NetInterface c = chooseInterface(cands, "", "", nullptr);
  EXPECT_EQ(c.name, "eth0");
  EXPECT_EQ(c.address.family(), AF_INET6);
}

TEST(ChooseInterface, FallsBackToLoopback) {
  NetInterface c =
      chooseInterface({itf("lo", "[::1]:0"), itf("lo", "127.0.0.1:0")}, "", "", nullptr);
  EXPECT_EQ(c.name, "lo");
  EXPECT_EQ(addrOnly(c), "127.0.0.1:0");  // IPv4 first
  // docker0 is never the default, even when it is the only other interface.
  c = chooseInterface({itf("docker0", "172.17.0.1:0"), itf("lo", "127.0.0.1:0")}, "", "", nullptr);
  EXPECT_EQ(c.name, "lo");
}

TEST(ChooseInterface, LoopbackTowardPicksLoopback) {
  SocketAddress toward = SocketAddress::parse("127.0.0.1:5000");
  NetInterface c = chooseInterface(typicalHost(), "", "", &toward);
  EXPECT_EQ(c.name, "lo");
  EXPECT_TRUE(c.address.isLoopback());
  SocketAddress remote = SocketAddress::parse("10.9.9.9:5000");
  EXPECT_EQ(chooseInterface(typicalHost(), "", "", &remote).name, "eth1");
  SocketAddress invalid;
  EXPECT_EQ(chooseInterface(typicalHost(), "", "", &invalid).name, "eth1");
}

TEST(ChooseInterface, SpecSelects) {
  EXPECT_EQ(chooseInterface(typicalHost(), "docker", "", nullptr).name, "docker0");
  EXPECT_EQ(chooseInterface(typicalHost(), "=lo", "", nullptr).name, "lo");
  // "eth" matches eth0 (IPv6, listed first) and eth1 (IPv4): IPv4 wins.
  EXPECT_EQ(chooseInterface(typicalHost(), "eth", "", nullptr).name, "eth1");
  NetInterface c = chooseInterface(typicalHost(), "^eth,docker", "", nullptr);
  EXPECT_EQ(c.name, "lo");
  EXPECT_EQ(addrOnly(c), "127.0.0.1:0");
  // An explicit spec wins over a loopback `toward`.
  SocketAddress toward = SocketAddress::parse("127.0.0.1:5000");
  EXPECT_EQ(chooseInterface(typicalHost(), "eth1", "", &toward).name, "eth1");
}

TEST(ChooseInterface, SpecMatchingNothingListsInterfaces) {
  std::string msg =
      messageOf<SystemError>([] { chooseInterface(typicalHost(), "ib", "", nullptr); });
  EXPECT_TRUE(contains(msg, "LOOM_SOCKET_IFNAME")) << msg;
  EXPECT_TRUE(contains(msg, "ib")) << msg;
  EXPECT_TRUE(contains(msg, "eth1")) << msg;
  EXPECT_TRUE(contains(msg, "10.1.2.3")) << msg;
  EXPECT_TRUE(contains(msg, "docker0")) << msg;
  EXPECT_TRUE(contains(msg, "lo")) << msg;
}

TEST(ChooseInterface, NoCandidatesThrowsSystemError) {
  EXPECT_THROW(chooseInterface({}, "", "", nullptr), SystemError);
  EXPECT_THROW(chooseInterface({}, "eth", "", nullptr), SystemError);
}

TEST(ChooseInterface, FamilyRestrictsChoice) {
  NetInterface c = chooseInterface(typicalHost(), "", "AF_INET6", nullptr);
  EXPECT_EQ(c.name, "eth0");
  EXPECT_EQ(c.address.family(), AF_INET6);
  c = chooseInterface(typicalHost(), "", "AF_INET", nullptr);
  EXPECT_EQ(c.name, "eth1");
  c = chooseInterface(typicalHost(), "lo", "AF_INET6", nullptr);
  EXPECT_EQ(addrOnly(c), "[::1]:0");
  // Only IPv4 here but IPv6 asked for.
  EXPECT_THROW(chooseInterface({itf("eth1", "10.1.2.3:0")}, "", "AF_INET6", nullptr), SystemError);
}

TEST(ChooseInterface, BadFamilyIsInvalidArgument) {
  std::string msg =
      messageOf<InvalidArgument>([] { chooseInterface(typicalHost(), "", "inet6", nullptr); });
  EXPECT_TRUE(contains(msg, "LOOM_SOCKET_FAMILY")) << msg;
  EXPECT_TRUE(contains(msg, "inet6")) << msg;
  EXPECT_THROW(chooseInterface(typicalHost(), "", "af_inet", nullptr), InvalidArgument);
}

// ---- socket.h: SocketAddress --------------------------------------------------------------

TEST(SocketAddress, ParsesIpv4) {
  SocketAddress a = SocketAddress::parse("127.0.0.1:5000");
  EXPECT_TRUE(a.valid());
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(a.length, sizeof(sockaddr_in));
  EXPECT_EQ(a.port(), 5000);
  EXPECT_EQ(a.toString(), "127.0.0.1:5000");
  a.setPort(65535);
  EXPECT_EQ(a.toString(), "127.0.0.1:65535");
}

TEST(SocketAddress, ParsesBracketedIpv6) {
  SocketAddress a = SocketAddress::parse("[::1]:6000");
  EXPECT_EQ(a.family(), AF_INET6);
  EXPECT_EQ(a.length, sizeof(sockaddr_in6));
  EXPECT_EQ(a.port(), 6000);
  EXPECT_EQ(a.toString(), "[::1]:6000");
  EXPECT_EQ(SocketAddress::parse("[2001:db8::7]:1").toString(), "[2001:db8::7]:1");
}

TEST(SocketAddress, ResolvesLocalhost) {
  SocketAddress a = SocketAddress::parse("localhost:7000");
  EXPECT_TRUE(a.valid());
  EXPECT_EQ(a.port(), 7000);
  EXPECT_TRUE(a.isLoopback()) << a.toString();
}

TEST(SocketAddress, PortZeroAllowed) {
  SocketAddress a = SocketAddress::parse("127.0.0.1:0");
  EXPECT_EQ(a.port(), 0);
  EXPECT_EQ(a.toString(), "127.0.0.1:0");
  EXPECT_EQ(SocketAddress::parse("[::1]:0").port(), 0);
}

TEST(SocketAddress, RejectsMalformedText) {
  for (const char* bad : {"nohostport", "1.2.3.4:99999", "::1:80", "[::1]80", "host:", "", ":80",
                          "1.2.3.4:-1", "1.2.3.4:80x", "[::1]", "[::1:80"}) {
    std::string msg = messageOf<InvalidArgument>([&] { SocketAddress::parse(bad); });
    EXPECT_FALSE(msg.empty()) << "'" << bad << "'";
    if (bad[0] != '\0') {
      EXPECT_TRUE(contains(msg, bad)) << "'" << bad << "': " << msg;
    }
  }
  // The unbracketed IPv6 case tells the user what to write instead.
  std::string msg = messageOf<InvalidArgument>([] { SocketAddress::parse("::1:80"); });
  EXPECT_TRUE(contains(msg, "[::1]:port")) << msg;
}

TEST(SocketAddress, DefaultIsInvalid) {
  SocketAddress a;
  EXPECT_FALSE(a.valid());
  EXPECT_FALSE(a.isLoopback());
  EXPECT_EQ(a.port(), 0);
  EXPECT_EQ(a.toString(), "<invalid address>");
}

TEST(SocketAddress, IsLoopback) {
  EXPECT_TRUE(SocketAddress::parse("127.0.0.1:1").isLoopback());
  EXPECT_TRUE(SocketAddress::parse("127.1.2.3:1").isLoopback());
  EXPECT_TRUE(SocketAddress::parse("127.255.255.254:1").isLoopback());
  EXPECT_TRUE(SocketAddress::parse("[::1]:1").isLoopback());
  EXPECT_FALSE(SocketAddress::parse("10.0.0.1:1").isLoopback());
  EXPECT_FALSE(SocketAddress::parse("128.0.0.1:1").isLoopback());
  EXPECT_FALSE(SocketAddress::parse("0.0.0.0:1").isLoopback());
  EXPECT_FALSE(SocketAddress::parse("[2001:db8::1]:1").isLoopback());
  EXPECT_FALSE(SocketAddress::parse("[::]:1").isLoopback());
}

}  // namespace
}  // namespace loom
