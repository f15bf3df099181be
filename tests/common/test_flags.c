/* common/flags.c: the flag table's getopt_long parser and its --help. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/flags.h"
#include "common/version.h"

typedef struct opts {
  const char *config, *out;
  uint64_t count;
  bool verbose;
  const char *hosts[3];
  size_t n_hosts;
  char *pos[4];
  size_t n_pos;
} opts_t;

/* Parses the NULL-terminated |args| (argv[0] added) into |o|. */
static int parse(opts_t *o, const char *const *args, size_t max_pos) {
  memset(o, 0, sizeof(*o));
  o->count = 7; /* the default */
  tg_flag_list_t hosts = {o->hosts, 3, &o->n_hosts};
  const tg_flag_t flags[] = {
      {"config", TG_FLAG_STRING, &o->config, "FILE", "-c: the config", 0, 0},
      {"out", TG_FLAG_STRING, &o->out, "FILE", "the output", 0, 0},
      {"count", TG_FLAG_UINT, &o->count, "N", "-n: how many", 1, 10},
      {"verbose", TG_FLAG_BOOL, &o->verbose, NULL, "-v: say more", 0, 0},
      {"host", TG_FLAG_LIST, &hosts, "HOST", "-H: a host; repeat", 0, 0},
  };
  char *argv[16] = {"prog"};
  int argc = 1;
  for (; args[argc - 1]; argc++) argv[argc] = (char *)args[argc - 1];
  return tg_flags_parse("prog", flags, sizeof(flags) / sizeof(flags[0]), argc,
                        argv, max_pos ? o->pos : NULL, max_pos, &o->n_pos);
}

static void flags_long_forms_with_space_or_equals(void **state) {
  (void)state;
  opts_t o;
  const char *a[] = {"--config", "c.pb", "--out=o.pb", "--count=3", "--verbose",
                     NULL};
  assert_int_equal(parse(&o, a, 0), 0);
  assert_string_equal(o.config, "c.pb");
  assert_string_equal(o.out, "o.pb");
  assert_int_equal(o.count, 3);
  assert_true(o.verbose);
}

static void flags_short_forms_come_from_the_help_text(void **state) {
  (void)state;
  opts_t o;
  const char *a[] = {"-c", "c.pb", "-n4", "-v", NULL};
  assert_int_equal(parse(&o, a, 0), 0);
  assert_string_equal(o.config, "c.pb");
  assert_int_equal(o.count, 4);
  assert_true(o.verbose);
  /* --out's help has no "-x: ": -o is not a flag. */
  const char *no_short[] = {"-o", "x", NULL};
  assert_int_equal(parse(&o, no_short, 0), -EINVAL);
}

static void flags_values_may_start_with_a_dash(void **state) {
  (void)state;
  opts_t o;
  const char *a[] = {"--config", "-", "-c", "--out", NULL};
  assert_int_equal(parse(&o, a, 0), 0);
  /* The last one wins; each took the next argument whatever it was. */
  assert_string_equal(o.config, "--out");
  assert_null(o.out);
}

static void flags_list_collects_every_value_in_order(void **state) {
  (void)state;
  opts_t o;
  const char *a[] = {"-H", "a", "--host=b", "-Hc", NULL};
  assert_int_equal(parse(&o, a, 0), 0);
  assert_int_equal(o.n_hosts, 3);
  assert_string_equal(o.hosts[0], "a");
  assert_string_equal(o.hosts[1], "b");
  assert_string_equal(o.hosts[2], "c");
  const char *too_many[] = {"-H", "a", "-H", "b", "-H", "c", "-H", "d", NULL};
  assert_int_equal(parse(&o, too_many, 0), -EINVAL);
  const char *empty[] = {"--host=", NULL};
  assert_int_equal(parse(&o, empty, 0), -EINVAL);
}

static void flags_positionals_in_order_and_after_double_dash(void **state) {
  (void)state;
  opts_t o;
  const char *a[] = {"one", "-v", "-", "--", "--count", "-x", NULL};
  assert_int_equal(parse(&o, a, 4), 0);
  assert_true(o.verbose);
  assert_int_equal(o.count, 7); /* after "--": not a flag */
  assert_int_equal(o.n_pos, 4);
  assert_string_equal(o.pos[0], "one");
  assert_string_equal(o.pos[1], "-");
  assert_string_equal(o.pos[2], "--count");
  assert_string_equal(o.pos[3], "-x");
  assert_int_equal(parse(&o, a, 3), -EINVAL); /* one too many */
  const char *none[] = {"stray", NULL};
  assert_int_equal(parse(&o, none, 0), -EINVAL);
}

static void flags_errors_are_reported(void **state) {
  (void)state;
  opts_t o;
  static const char *const cases[][4] = {
      {"--nope", NULL},          /* unknown long */
      {"-z", NULL},              /* unknown short */
      {"--conf", "x", NULL},     /* a prefix is not the name */
      {"--verb", NULL},          /* nor for a bool */
      {"--config", NULL},        /* missing value */
      {"-c", NULL},              /* missing value, short */
      {"--config=", NULL},       /* empty value */
      {"--verbose=yes", NULL},   /* a bool takes none */
      {"--count", "abc", NULL},  /* not a number */
      {"--count", "11", NULL},   /* out of range */
      {"--count", "-1", NULL},   /* negative */
      {"--count", " 5", NULL},   /* strtoull() skips the blank */
      {"--count", "+5", NULL},   /* and takes a sign */
      {"--count", "99999999999999999999", NULL}, /* past 2^64 */
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (parse(&o, cases[i], 0) != -EINVAL) fail_msg("case %zu accepted", i);
  }
}

/* File modes: octal digits only, 07777 at most. */
static void flags_octal_takes_octal_digits_only(void **state) {
  (void)state;
  unsigned mode = 0;
  const tg_flag_t flags[] = {
      {"mode", TG_FLAG_OCTAL, &mode, "MODE", "the mode", 0, 0},
  };
  static const char *const bad[] = {" 644", "+644", "-644", "", "8",
                                    "0x1ff", "10000", "0644 ",
                                    "7777777777777777777777777"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char *argv[] = {"prog", "--mode", (char *)bad[i], NULL};
    mode = 1;
    if (tg_flags_parse("prog", flags, 1, 3, argv, NULL, 0, NULL) != -EINVAL)
      fail_msg("'%s' accepted", bad[i]);
    assert_int_equal(mode, 1);
  }
  char *ok[] = {"prog", "--mode", "0640", NULL};
  assert_int_equal(tg_flags_parse("prog", flags, 1, 3, ok, NULL, 0, NULL), 0);
  assert_int_equal(mode, 0640);
}

static void flags_help_stops_parsing(void **state) {
  (void)state;
  opts_t o;
  const char *l[] = {"--count", "2", "--help", "--nope", NULL};
  assert_int_equal(parse(&o, l, 0), 1);
  const char *s[] = {"-h", NULL};
  assert_int_equal(parse(&o, s, 0), 1);
  const char *prefix[] = {"--he", NULL};
  assert_int_equal(parse(&o, prefix, 0), -EINVAL);
}

/* Parsing twice in a row starts afresh (getopt's state is global). */
static void flags_parse_again_from_the_start(void **state) {
  (void)state;
  opts_t o;
  const char *a[] = {"-v", "-n", "2", NULL};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(parse(&o, a, 0), 0);
    assert_true(o.verbose);
    assert_int_equal(o.count, 2);
  }
}

static void flags_usage_lists_flags_defaults_and_short_forms(void **state) {
  (void)state;
  const char *config = "default.pb";
  uint64_t count = 7;
  bool verbose = false;
  const tg_flag_t flags[] = {
      {"config", TG_FLAG_STRING, &config, "FILE", "-c: the config", 0, 0},
      {"count", TG_FLAG_UINT, &count, "N", "how many", 1, 10},
      {"verbose", TG_FLAG_BOOL, &verbose, NULL, "-v: say more", 0, 0},
  };
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  tg_flags_usage(f, "prog", "[options]", flags, 3);
  fclose(f);
  assert_non_null(strstr(text, "usage: prog [options]\n"));
  assert_non_null(strstr(text, "--config FILE"));
  assert_non_null(strstr(text, "-c: the config (default: default.pb)"));
  assert_non_null(strstr(text, "how many (default: 7)"));
  assert_non_null(strstr(text, "--help"));
  assert_non_null(strstr(text, "short forms: -c = --config, -v = --verbose\n"));
  free(text);
}

typedef struct unit_opts {
  uint64_t ms, s, bytes, kib;
} unit_opts_t;

static const tg_flag_t *unit_flags(unit_opts_t *u, size_t *n) {
  static tg_flag_t flags[4];
  const tg_flag_t f[] = {
      {"timeout-ms", TG_FLAG_MS, &u->ms, "DURATION", "a timeout", 100, 600000},
      {"lifetime", TG_FLAG_SECONDS, &u->s, "DURATION", "a lifetime", 0, 3600},
      {"size", TG_FLAG_BYTES, &u->bytes, "SIZE", "a size", 0, 0},
      {"high-water-kb", TG_FLAG_KIB, &u->kib, "SIZE", "a queue", 64, 1048576},
  };
  memcpy(flags, f, sizeof(f));
  *n = 4;
  return flags;
}

static int parse_units(unit_opts_t *u, const char *a, const char *b) {
  *u = (unit_opts_t){10000, 10, 4096, 4096};
  size_t n;
  const tg_flag_t *flags = unit_flags(u, &n);
  char *argv[] = {"prog", (char *)a, (char *)b, NULL};
  return tg_flags_parse("prog", flags, n, b ? 3 : 2, argv, NULL, 0, NULL);
}

static void flags_units_take_the_one_grammar(void **state) {
  (void)state;
  unit_opts_t u;
  /* A number alone counts the flag's unit, as these flags always did. */
  assert_int_equal(parse_units(&u, "--timeout-ms=250", "--lifetime=90"), 0);
  assert_int_equal(u.ms, 250);
  assert_int_equal(u.s, 90);
  assert_int_equal(parse_units(&u, "--size=4096", "--high-water-kb=128"), 0);
  assert_int_equal(u.bytes, 4096);
  assert_int_equal(u.kib, 128);
  /* Units, into the flag's unit. */
  assert_int_equal(parse_units(&u, "--timeout-ms=1.5s", "--lifetime=1h"), 0);
  assert_int_equal(u.ms, 1500);
  assert_int_equal(u.s, 3600);
  assert_int_equal(parse_units(&u, "--timeout-ms=1m30s", "--lifetime=2000ms"), 0);
  assert_int_equal(u.ms, 90000);
  assert_int_equal(u.s, 2);
  assert_int_equal(parse_units(&u, "--size=64MiB", "--high-water-kb=4M"), 0);
  assert_int_equal(u.bytes, 64ull << 20);
  assert_int_equal(u.kib, 4096);
  assert_int_equal(parse_units(&u, "--size=1.5k", "--high-water-kb=1G"), 0);
  assert_int_equal(u.bytes, 1536);
  assert_int_equal(u.kib, 1048576);
}

static void flags_units_refuse_and_keep_the_default(void **state) {
  (void)state;
  unit_opts_t u;
  static const char *const bad[] = {
      "--timeout-ms=",       "--timeout-ms=-1s",      "--timeout-ms=10x",
      "--timeout-ms=99ms",   /* below the range */   "--timeout-ms=11m",
      "--lifetime=1500ms",   /* not whole seconds */ "--lifetime=2h",
      "--size=1.1k",         "--size=1e3",            "--size=16777216T",
      "--high-water-kb=1000b", /* not whole KiB */
      "--high-water-kb=32",  "--lifetime=1m30",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    int rv = parse_units(&u, bad[i], NULL);
    if (rv != -EINVAL) fail_msg("%s: %d", bad[i], rv);
    assert_int_equal(u.ms, 10000);
    assert_int_equal(u.s, 10);
    assert_int_equal(u.bytes, 4096);
    assert_int_equal(u.kib, 4096);
  }
}

static void flags_usage_spells_unit_defaults(void **state) {
  (void)state;
  unit_opts_t u = {10000, 90, 64ull << 20, 4096};
  size_t n;
  const tg_flag_t *flags = unit_flags(&u, &n);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  tg_flags_usage(f, "prog", "[options]", flags, n);
  fclose(f);
  assert_non_null(strstr(text, "a timeout (a number alone: ms; default: 10s)"));
  assert_non_null(strstr(text, "a lifetime (a number alone: seconds; default: 1m30s)"));
  assert_non_null(strstr(text, "a size (a number alone: bytes; default: 64M)"));
  assert_non_null(strstr(text, "a queue (a number alone: KiB; default: 4M)"));
  assert_non_null(strstr(text, "durations: 500ms"));
  free(text);
}

/* main()'s flags (tg_prog_flags): go on with the targets set, or the
 * status to exit with. */
static int prog_parse(const char *const *args, uint64_t *count) {
  const tg_flag_t flags[] = {
      {"count", TG_FLAG_UINT, count, "N", "-n: how many", 1, 10},
  };
  static const tg_prog_t prog = {.name = "prog", .synopsis = "[options]"};
  char *argv[8] = {"prog"};
  int argc = 1;
  for (; args[argc - 1]; argc++) argv[argc] = (char *)args[argc - 1];
  int status = -1;
  if (!tg_prog_flags(&prog, flags, 1, argc, argv, NULL, 0, NULL, &status))
    return -1;
  return status;
}

static void prog_flags_exit_statuses(void **state) {
  (void)state;
  uint64_t count = 0;
  const char *go[] = {"-n", "3", NULL};
  assert_int_equal(prog_parse(go, &count), -1);
  assert_int_equal(count, 3);
  const char *help[] = {"--help", NULL};
  assert_int_equal(prog_parse(help, &count), TG_EXIT_OK);
  const char *version[] = {"-n", "4", "--version", NULL};
  assert_int_equal(prog_parse(version, &count), TG_EXIT_OK);
  const char *bad[] = {"--nope", NULL};
  assert_int_equal(prog_parse(bad, &count), TG_EXIT_USAGE);
  /* The whole line is read before --version answers. */
  const char *bad_value[] = {"--version", "-n", "11", NULL};
  assert_int_equal(prog_parse(bad_value, &count), TG_EXIT_USAGE);
  const char *value_for_version[] = {"--version=yes", NULL};
  assert_int_equal(prog_parse(value_for_version, &count), TG_EXIT_USAGE);
}

/* One format of --version: "PROGRAM VERSION", then any detail lines. */
static void detail(FILE *out) { fputs("TLS: by someone\n", out); }

static void prog_version_names_the_program(void **state) {
  (void)state;
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  tg_prog_version(f, &(const tg_prog_t){.name = "tracegate stats",
                                        .version_name = "tracegate"});
  tg_prog_version(f, &(const tg_prog_t){.name = "tracegate-relay",
                                        .version_detail = detail});
  fclose(f);
  char want[256];
  snprintf(want, sizeof(want), "tracegate %s\ntracegate-relay %s\nTLS: by someone\n",
           TG_VERSION, TG_VERSION);
  assert_string_equal(text, want);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(flags_long_forms_with_space_or_equals),
      cmocka_unit_test(flags_short_forms_come_from_the_help_text),
      cmocka_unit_test(flags_values_may_start_with_a_dash),
      cmocka_unit_test(flags_list_collects_every_value_in_order),
      cmocka_unit_test(flags_positionals_in_order_and_after_double_dash),
      cmocka_unit_test(flags_errors_are_reported),
      cmocka_unit_test(flags_octal_takes_octal_digits_only),
      cmocka_unit_test(flags_help_stops_parsing),
      cmocka_unit_test(flags_parse_again_from_the_start),
      cmocka_unit_test(flags_usage_lists_flags_defaults_and_short_forms),
      cmocka_unit_test(flags_units_take_the_one_grammar),
      cmocka_unit_test(flags_units_refuse_and_keep_the_default),
      cmocka_unit_test(flags_usage_spells_unit_defaults),
      cmocka_unit_test(prog_flags_exit_statuses),
      cmocka_unit_test(prog_version_names_the_program),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
