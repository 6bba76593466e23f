/* test_auth.c -- the Host allow-list and the token file of attuned
 * (daemon/auth.c). */
#include "../daemon/auth.c"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

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

/* A start killed while it writes a new token file (here by SIGXFSZ: a
 * file size limit of 0 bytes makes its first write fatal) leaves no token
 * file behind, so the next start creates one; it used to leave an empty
 * one that refused every later start ("must be 16 to 255 characters"). */
static void token_file_should_not_be_left_empty_by_a_crash(void)
{
    char dir[300], path[400], token[AUTH_TOKEN_MAX] = "", used[400], err[256];
    int loose = 0;
    test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/token", dir);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {0, 0};
        signal(SIGXFSZ, SIG_DFL);
        setrlimit(RLIMIT_FSIZE, &rl);
        auth_token_load(path, path, token, used, sizeof used, &loose, err, sizeof err);
        _exit(0); /* not reached: the write kills it */
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ,
              "the child did not die in its write (status %d)", status);
    CHECK_MSG(access(path, F_OK) != 0, "%s left behind", path);
    CHECK_EQ_INT(auth_token_load(path, path, token, used, sizeof used, &loose, err, sizeof err),
                 0);
    CHECK_EQ_INT((int)strlen(token), 64);
    CHECK_EQ_INT(loose, 0);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
    char again[AUTH_TOKEN_MAX] = "";
    CHECK_EQ_INT(auth_token_load(path, path, again, used, sizeof used, &loose, err, sizeof err),
                 0);
    CHECK(strcmp(token, again) == 0); /* made once, then read */
}

int main(void)
{
    RUN(host_should_match_a_bare_ipv6_bind_address);
    RUN(host_should_keep_the_loopback_and_name_rules);
    RUN(token_file_should_not_be_left_empty_by_a_crash);
    return test_summary();
}
