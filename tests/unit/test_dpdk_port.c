/* tests/unit/test_dpdk_port.c — what dpdk_port can show without the EAL
 * (Criterion forks per test and the EAL starts once per process; the port
 * itself is exercised by tests/integration/test_dpdk_net): the EAL
 * argument string split like a shell and checked against the EAL's
 * options, with errors that name the argument. */
#include <criterion/criterion.h>
#include <string.h>

#include "dataplane/dpdk_port.h"

static char buf[DPDK_EAL_MAX_LEN], err[256];
static char *argv[DPDK_EAL_MAX_ARGS];

static int split(const char *s)
{
	err[0] = 0;
	return dpdk_eal_split(s, buf, sizeof(buf), argv, DPDK_EAL_MAX_ARGS, err, sizeof(err));
}

Test(dpdk_port, split_like_a_shell)
{
	cr_assert_eq(split("--no-huge -m 256 --no-pci --file-prefix=sl1 --vdev=net_tap0,iface=t0"), 7);
	cr_assert_str_eq(argv[0], "sluiced");
	cr_assert_str_eq(argv[1], "--no-huge");
	cr_assert_str_eq(argv[2], "-m");
	cr_assert_str_eq(argv[3], "256");
	cr_assert_str_eq(argv[5], "--file-prefix=sl1");
	cr_assert_str_eq(argv[6], "--vdev=net_tap0,iface=t0");
	cr_assert_null(argv[7]);

	cr_assert_eq(split("  --vdev 'net_memif0,role=server,socket=/tmp/a b.sock'\t-l\"0-1\"  "), 4);
	cr_assert_str_eq(argv[2], "net_memif0,role=server,socket=/tmp/a b.sock");
	cr_assert_str_eq(argv[3], "-l0-1");
	cr_assert_eq(split("--file-prefix=a\\ b --log-level \"pmd.*:\\\"8\\\"\\\\\""), 4);
	cr_assert_str_eq(argv[1], "--file-prefix=a b");
	cr_assert_str_eq(argv[3], "pmd.*:\"8\"\\");
	cr_assert_eq(split("--file-prefix=x''y\"\""), 2, "quotes join words");
	cr_assert_str_eq(argv[1], "--file-prefix=xy");
	cr_assert_eq(split(""), 1);
	cr_assert_eq(split(NULL), 1);
	cr_assert_eq(split("-l 0 -n4 -v"), 5);
	cr_assert_eq(split("--huge-unlink=never --no-shconf"), 3, "optional value with =");
}

Test(dpdk_port, split_names_the_bad_argument)
{
	cr_assert_eq(split("--no-huge --vdev='net_tap0,iface=x"), -EINVAL);
	cr_assert(strstr(err, "unterminated ' quote"), "%s", err);
	cr_assert(strstr(err, "argument 2"), "%s", err);
	cr_assert_eq(split("--no-huge --nohuge"), -EINVAL);
	cr_assert(strstr(err, "'--nohuge'") && strstr(err, "not an EAL option"), "%s", err);
	cr_assert_eq(split("--no-huge -m"), -EINVAL);
	cr_assert(strstr(err, "'-m'") && strstr(err, "needs a value"), "%s", err);
	cr_assert_eq(split("--file-prefix"), -EINVAL);
	cr_assert(strstr(err, "--file-prefix needs a value"), "%s", err);
	cr_assert_eq(split("--no-pci=yes"), -EINVAL);
	cr_assert(strstr(err, "takes no value"), "%s", err);
	cr_assert_eq(split("--help"), -EINVAL);
	cr_assert(strstr(err, "exit"), "%s", err);
	cr_assert_eq(split("-h"), -EINVAL);
	cr_assert_eq(split("-x 1"), -EINVAL);
	cr_assert(strstr(err, "-x is not an EAL option"), "%s", err);
	cr_assert_eq(split("--no-huge 256"), -EINVAL);
	cr_assert(strstr(err, "'256'") && strstr(err, "not an option"), "%s", err);
	cr_assert_eq(split("-- --no-huge"), -EINVAL);
	cr_assert_eq(split("--vdev=a\\"), -EINVAL);
	cr_assert(strstr(err, "backslash"), "%s", err);
	cr_assert_eq(split("--no-huge --in-memory"), -EINVAL);
	cr_assert(strstr(err, "--in-memory does not combine with --no-huge"), "%s", err);
}

Test(dpdk_port, split_bounds)
{
	char big[DPDK_EAL_MAX_LEN + 64], *p = big;

	for (int i = 0; i < DPDK_EAL_MAX_ARGS; i++)
		p += sprintf(p, "-v ");
	cr_assert_eq(split(big), -E2BIG);
	memset(big, 'a', sizeof(big) - 1);
	memcpy(big, "--vdev=", 7);
	big[sizeof(big) - 1] = 0;
	cr_assert_eq(split(big), -E2BIG);
	cr_assert(strstr(err, "longer than"), "%s", err);
}

Test(dpdk_port, config_defaults)
{
	struct dpdk_port_config c;

	dpdk_port_config_defaults(&c);
	cr_assert_eq(c.shards, 1);
	cr_assert_eq(c.replication, 1);
	cr_assert_eq(c.rss, 1);
	cr_assert_eq(c.csum_offload, 1);
	cr_assert_eq(c.mtu, 0);
}
