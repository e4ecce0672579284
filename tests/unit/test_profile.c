/* tests/unit/test_profile.c — control/hw_profile: hardware profiles parse, every
 * shipped profile (hw-profiles/, .conf) loads with the keys a benchmark needs, and each
 * kind of bad line is an error naming the file and the line. The parser
 * is in the core library (the broker loads one: hardware.profile). */
#include <errno.h>
#include <glob.h>

#include "control/hw_profile.h"
#include "tests/unit/helpers.h"

static struct hw_profile p;
static char err[512];

static int parse(const char *text)
{
	err[0] = 0;
	return hw_profile_parse(text, strlen(text), "t.conf", &p, err, sizeof(err));
}

Test(profile, keys_values_comments_and_spaces)
{
	cr_assert_eq(parse("# a comment\n\ndescription = a box, 2 cores\ncores=2\n  clock_ghz = 2.5 \r\n"
			   "nic_gbps=25\ndisk_write_mbps=4000\nsync_write_us=20.5\n"),
		     0, "%s", err);
	cr_assert_str_eq(p.description, "a box, 2 cores");
	cr_assert(p.has[HW_CORES] && p.v[HW_CORES] == 2);
	cr_assert(p.has[HW_CLOCK_GHZ] && p.v[HW_CLOCK_GHZ] == 2.5);
	cr_assert_eq(hw_get(&p, HW_NIC_GBPS), 25);
	cr_assert_eq(hw_get(&p, HW_SYNC_WRITE_US), 20.5);
	cr_assert(!p.has[HW_MEMIF_GBPS], "an absent key is not known, not 0");
	cr_assert_eq(hw_get(&p, HW_MEMIF_GBPS), 0);
	/* hwprobe's way of saying a figure is absent: a comment */
	cr_assert_eq(parse("description=x\n# nic_gbps= absent: virtual NIC\n"), 0, "%s", err);
	cr_assert(!p.has[HW_NIC_GBPS]);
}

Test(profile, bad_lines_name_file_and_line)
{
	cr_assert_eq(parse("description=x\ncores=2\nflux_capacitors=3\n"), -EINVAL);
	cr_assert(strstr(err, "t.conf:3:") && strstr(err, "unknown key 'flux_capacitors'"), "%s", err);
	cr_assert_eq(parse("description=x\n\nnic_gbps=fast\n"), -EINVAL);
	cr_assert(strstr(err, "t.conf:3:") && strstr(err, "nic_gbps") && strstr(err, "'fast'"), "%s", err);
	cr_assert_eq(parse("description=x\ncores=2.5\n"), -EINVAL);
	cr_assert(strstr(err, "t.conf:2:") && strstr(err, "whole number"), "%s", err);
	cr_assert_eq(parse("description=x\ndisk_read_mbps=-3\n"), -EINVAL);
	cr_assert(strstr(err, "t.conf:2:"), "%s", err);
	cr_assert_eq(parse("description=x\ndisk_read_mbps=\n"), -EINVAL);
	cr_assert_eq(parse("description=x\ndisk_read_mbps=nan\n"), -EINVAL);
	cr_assert_eq(parse("description=x\ncores=4\ncores=8\n"), -EINVAL);
	cr_assert(strstr(err, "t.conf:3:") && strstr(err, "twice"), "%s", err);
	cr_assert_eq(parse("description=x\njust words\n"), -EINVAL);
	cr_assert(strstr(err, "t.conf:2:") && strstr(err, "key=value"), "%s", err);
	cr_assert_eq(parse("cores=4\n"), -EINVAL);
	cr_assert(strstr(err, "t.conf") && strstr(err, "description"), "%s", err);
}

Test(profile, load_names_a_missing_file)
{
	cr_assert_eq(hw_profile_load("/nonexistent/x.conf", &p, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "/nonexistent/x.conf"), "%s", err);
}

/* Every shipped profile loads and has what a benchmark divides by: the NIC
 * line rate, disk bandwidth both ways, the synced write latency, cores. */
Test(profile, shipped_profiles_load)
{
	glob_t g;
	int n = 0;

	cr_assert_eq(glob("hw-profiles/*.conf", 0, NULL, &g), 0, "run from the repository root");
	for (size_t i = 0; i < g.gl_pathc; i++) {
		const char *path = g.gl_pathv[i];

		if (strstr(path, "/local.conf"))
			continue;   /* this machine's, from scripts/hwprobe: not shipped */
		cr_assert_eq(hw_profile_load(path, &p, err, sizeof(err)), 0, "%s", err);
		for (int k = HW_CORES; k <= HW_SYNC_WRITE_US; k++)
			cr_assert(p.has[k], "%s has no %s", path, hw_key_name[k]);
		n++;
	}
	globfree(&g);
	cr_assert_geq(n, 3, "hw-profiles/ ships at least three profiles, found %d", n);
}
