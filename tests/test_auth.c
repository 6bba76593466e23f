/* test_auth.c -- the Host allow-list of attuned (daemon/auth.c). */
#include "../daemon/auth.c"
#include "test.h"

static void host_should_match_a_bare_ipv6_bind_address(void)
{
    /* --bind fd00::2 puts the bare address in the list; browsers and
     * curl send it bracketed (issue 15 item 3: every request was 403) */
    const char *extra[] = {"fd00::2"};
    CHECK(auth_host_allowed("[fd00::2]:7373", extra, 1));
    CHECK(auth_host_allowed("[fd00::2]", extra, 1));
    CHECK(auth_host_allowed("[FD00:0:0::2]:7373", extra, 1)); /* another spelling */
    CHECK(!auth_host_allowed("[fd00::3]:7373", extra, 1));
    CHECK(!auth_host_allowed("fd00::2", extra, 1)); /* bare IPv6 in Host is malformed */
    CHECK(!auth_host_allowed("[fd00::2]x", extra, 1));
    const char *bracketed[] = {"[fd00::2]"};
    CHECK(auth_host_allowed("[fd00::2]:1", bracketed, 1));
}

static void host_should_keep_the_loopback_and_name_rules(void)
{
    const char *extra[] = {"gpu-box.lan", "10.0.0.5"};
    CHECK(auth_host_allowed("localhost:7373", NULL, 0));
    CHECK(auth_host_allowed("127.0.0.1", NULL, 0));
    CHECK(auth_host_allowed("[::1]:7373", NULL, 0));
    CHECK(auth_host_allowed("GPU-BOX.lan:7373", extra, 2));
    CHECK(auth_host_allowed("10.0.0.5:80", extra, 2));
    CHECK(!auth_host_allowed("evil.example", extra, 2));
    CHECK(!auth_host_allowed("10.0.0.50", extra, 2));
    CHECK(!auth_host_allowed("[::2]", extra, 2));
    CHECK(!auth_host_allowed("", extra, 2));
}

int main(void)
{
    RUN(host_should_match_a_bare_ipv6_bind_address);
    RUN(host_should_keep_the_loopback_and_name_rules);
    return test_summary();
}
