/* tracegate: the command-line consumer. Records traces from the local
 * tracegated (or, through the relay, from remote ones) into Perfetto trace
 * files, and shows the service's state. This file only dispatches to the
 * subcommands; each lives in its own file. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/libcrypto_init.h"
#include "common/log.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: " CLI_PROG " COMMAND [OPTIONS]\n"
          "\n"
          "Records traces from tracegated (a Perfetto-compatible tracing "
          "service)\ninto Perfetto trace files, and shows the service's "
          "state.\n"
          "\n"
          "commands:\n"
          "  record    record a trace into a file (from a config, or from "
          "data source names),\n"
          "            from the local service or from remote hosts (-H, "
          "--hosts)\n"
          "  query     list the producers, data sources and tracing sessions\n"
          "  stats     show the buffer statistics of a tracing session\n"
          "  trigger   activate triggers (Perfetto's trigger_perfetto)\n"
          "  bridge    let the Perfetto UI record from here and from relays "
          "(Perfetto's\n            websocket_bridge)\n"
          "  snapshot  ask tracegate-collector for a fleet snapshot and wait "
          "until it is stored\n"
          "  functions where a function took a share of CPU across the "
          "collector's snapshots\n"
          "  symbolize name a trace's profile frames from debug files found "
          "by build id\n"
          "  profile   a trace's CPU profiles per host: a summary, or pprof "
          "(--pprof)\n"
          "  help      show the help of a command: " CLI_PROG " help record\n"
          "\n"
          "Perfetto's form works too: '" CLI_PROG " -c CONFIG -o OUT' is '" CLI_PROG
          " record ...',\n'" CLI_PROG " --query' is '" CLI_PROG " query' ("
          "--query-raw: query --raw).\n"
          CLI_PROG " --version prints the version.\n"
          "Every command takes --help. See also tracegate(1).\n");
}

static int run(const char *cmd, int argc, char **argv) {
  if (!strcmp(cmd, "record")) return cli_record_main(argc, argv);
  if (!strcmp(cmd, "query")) return cli_query_main(argc, argv);
  if (!strcmp(cmd, "stats")) return cli_stats_main(argc, argv);
  if (!strcmp(cmd, "trigger")) return cli_trigger_main(argc, argv);
  if (!strcmp(cmd, "bridge")) return cli_bridge_main(argc, argv);
  if (!strcmp(cmd, "snapshot")) return cli_snapshot_main(argc, argv);
  if (!strcmp(cmd, "functions")) return cli_functions_main(argc, argv);
  if (!strcmp(cmd, "profile")) return cli_profile_main(argc, argv);
  if (!strcmp(cmd, "symbolize")) return cli_symbolize_main(argc, argv);
  fprintf(stderr, CLI_PROG ": unknown command '%s' (see " CLI_PROG " --help)\n",
          cmd);
  return CLI_EXIT_USAGE;
}

int main(int argc, char **argv) {
  /* First: libwebsockets and tls/ start libcrypto too (libcrypto_init.h). */
  (void)tg_libcrypto_init();
  signal(SIGPIPE, SIG_IGN);
  tg_log_set_prefix(CLI_PROG);
  tg_log_set_level(TG_LOG_WARN);
  if (argc < 2) {
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  const char *a = argv[1];
  if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
    usage(stdout);
    return CLI_EXIT_OK;
  }
  if (!strcmp(a, "help")) {
    if (argc < 3) {
      usage(stdout);
      return CLI_EXIT_OK;
    }
    char *help_argv[] = {argv[2], "--help", NULL};
    return run(argv[2], 2, help_argv);
  }
  if (!strcmp(a, "--version")) {
    tg_prog_version(stdout, &(const tg_prog_t){.name = CLI_PROG});
    return CLI_EXIT_OK;
  }
  if (!strcmp(a, "--query")) {
    argv[1] = "query";
    return cli_query_main(argc - 1, argv + 1);
  }
  if (!strcmp(a, "--query-raw")) {
    /* Perfetto's spelling of query --raw: the flag goes after the rest. */
    argv[1] = "--raw";
    return cli_query_main(argc, argv);
  }
  if (a[0] == '-') /* Perfetto's form: flags without a command record */
    return cli_record_main(argc, argv);
  return run(a, argc - 1, argv + 1);
}
