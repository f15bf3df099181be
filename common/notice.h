/* Notice codes: the stable names of what the programs tell a person.
 *
 * A line on stderr or in a log that a script (or a test) may need to
 * recognise carries its code in brackets just before the sentence:
 *
 *   tracegate: [TG-1003] stopping the trace (Ctrl-C again to abort)
 *   2026-11-26T10:00:00.000Z tracegate-relay info relay.c:88: [TG-4001] ...
 *
 * The sentence may be reworded at any time; a code keeps its meaning for
 * good and a retired code is never given to another meaning. A script
 * matches the code, and the data the line carries (a path, a host, a key),
 * never the words. Several lines may carry one code when they say the same
 * thing (the single-host and the fleet recorder both stop on Ctrl-C). A
 * reason passed on from another program or module keeps its own code
 * inside the line: "tracegate: [TG-2038] cannot connect to h:1: [TG-4019]
 * this relay does not authorize ...".
 *
 * The relay's audit trail (relay/audit.h) gives each line's reason its
 * code as a field of its own, just before the reason's words; a refusal a
 * service sends a consumer (an EnableTracing or CloneSession error)
 * carries its code before the words too, as the client shows it.
 *
 * docs/notices.md lists every code with its meaning: docs/gen-notices.py
 * writes it from this table, and the test docs_notices_current fails when
 * the page is stale.
 *
 * Ranges: 1xxx tracegate (one host), 2xxx tracegate record -H (a fleet),
 * 3xxx tracegated, 4xxx tracegate-relay, 5xxx tracegate-collector, 6xxx
 * tracegate-probes, 7xxx the shared libraries (any program: TLS, a data
 * source a host did not run), 8xxx tracegate-perf.
 */
#ifndef TRACEGATE_COMMON_NOTICE_H
#define TRACEGATE_COMMON_NOTICE_H

#include <stddef.h>

/* X(NAME, number, program, meaning). Numbers are unique and never reused. */
#define TG_NOTICE_MAP(X)                                                      \
  X(SERVICE_UNREACHABLE, 1001, "tracegate",                                   \
    "cannot connect to the tracing service's consumer socket; the address "   \
    "and the reason follow")                                                  \
  X(ATTACH_FAILED, 1002, "tracegate",                                         \
    "cannot attach to a detached session; the key and the service's reason "  \
    "follow")                                                                 \
  X(STOPPING, 1003, "tracegate",                                              \
    "the first Ctrl-C (or SIGTERM): the trace stops with a final flush; a "   \
    "second Ctrl-C aborts")                                                   \
  X(ABORTED, 1004, "tracegate",                                               \
    "a second Ctrl-C: the program ends at once, without the final flush "     \
    "(exit 130)")                                                             \
  X(PARTIAL_KEPT, 1005, "tracegate",                                          \
    "a trace cut short was kept; its path ends the line")                     \
  X(NO_LOSS, 1006, "tracegate",                                               \
    "the service's final statistics count no data lost")                      \
  X(DATA_LOSS, 1007, "tracegate",                                             \
    "the final statistics count data lost; one counter per following line")   \
  X(LOSS_UNKNOWN, 1008, "tracegate",                                          \
    "the final statistics did not arrive: whether data was lost is unknown")  \
  X(CONFIG_INVALID, 1009, "tracegate",                                        \
    "the trace config does not parse or decode; the file (with line and "     \
    "column for a text config) and the reason follow")                        \
  X(SESSION_FAILED, 1010, "tracegate",                                        \
    "the session could not start or ended in failure; the reason follows "    \
    "(when the service refused the config, with its own code and the field " \
    "at fault)")                                                              \
  X(OUTPUT_UNWRITABLE, 1011, "tracegate",                                     \
    "the output cannot be written; the path and the reason follow")           \
  X(NO_SUCH_SESSION, 1012, "tracegate",                                       \
    "stats --session: the service has no session with that id")               \
  X(TRACE_WRITTEN, 1013, "tracegate",                                         \
    "the trace was written; the path, its size, packets and duration follow") \
  X(TRACE_WRITTEN_ATTACHED, 1014, "tracegate",                                \
    "the trace of a session attached to with --attach was written; the "      \
    "duration given is the time attached, not the session's run time")        \
  X(UNKNOWN_DATA_SOURCE, 1015, "tracegate",                                   \
    "warning: a data source or field the config names is not known to the "   \
    "service; the name (and the closest known names) follow")                 \
  X(PROGRESS, 1016, "tracegate",                                              \
    "the progress line redrawn on a terminal: time, bytes, packets, loss")    \
  X(TRIGGER_UNREACHABLE, 1017, "tracegate",                                   \
    "tracegate trigger cannot connect to the producer socket; the path and "  \
    "the reason follow")                                                      \
  X(TRIGGER_ACTIVATED, 1018, "tracegate",                                     \
    "tracegate trigger: the service took the triggers; their names follow")   \
  X(TRIGGER_NEVER_FIRED, 1019, "tracegate",                                   \
    "a session waiting for a trigger ended without it (trigger_timeout_ms); " \
    "the trigger names and the timeout follow")                               \
  X(SNAPSHOT_WRITTEN, 1020, "tracegate",                                      \
    "a snapshot (--clone, or a CLONE_SNAPSHOT trigger) was written; the "     \
    "path, its size and the session follow")                                  \
  X(CLONE_FAILED, 1021, "tracegate",                                          \
    "the service cannot clone the session; the id and its reason follow")     \
  X(CLONE_SNAPSHOT_UNSUPPORTED, 1022, "tracegate",                            \
    "a CLONE_SNAPSHOT trigger_mode asked of a recording that cannot write "   \
    "snapshots")                                                              \
  X(USAGE, 1023, "tracegate",                                                 \
    "the command line is refused before anything starts (exit 2)")            \
  X(NOT_A_CONSUMER_SOCKET, 1024, "tracegate",                                 \
    "the address answered, but not as a tracing service's consumer socket "   \
    "(a producer socket?); the address follows")                              \
  X(SERVICE_CLOSED_EARLY, 1025, "tracegate",                                  \
    "the service took the connection and closed it before answering (at its " \
    "--max-consumers limit?); the address follows")                           \
  X(TRACE_EMPTY, 1026, "tracegate",                                           \
    "the trace holds no packet: nothing was written; the path follows")       \
  X(TRACE_DAMAGED, 1027, "tracegate",                                         \
    "the trace file the service wrote does not hold whole packets; the path " \
    "and the reason follow")                                                  \
  X(TRACE_WRITTEN_BY_SERVICE, 1028, "tracegate",                              \
    "the service writes (or wrote) the trace into the file given at "         \
    "--detach (write_into_file)")                                             \
  X(SESSION_ENDED, 1029, "tracegate",                                         \
    "how the session ended (its duration, the service, Ctrl-C, SIGTERM, "     \
    "--stop); --summary-json's hosts[].end has the token")                    \
  X(DETACHED, 1030, "tracegate",                                              \
    "--detach: the session runs on in the service under the key that "       \
    "follows (also printed alone on stdout)")                                 \
  X(ATTACH_NEEDS_OUTPUT, 1031, "tracegate",                                   \
    "--attach without -o: the session keeps its trace in the service's "     \
    "buffers and is given back")                                              \
  X(STATS_FAILED, 1032, "tracegate",                                          \
    "stats --attach: the session's statistics cannot be read; the reason "   \
    "follows")                                                                \
  X(DETACH_FAILED, 1033, "tracegate",                                         \
    "the session cannot be detached again (it ends now); the reason follows") \
  X(UNACTED_FIELDS, 1034, "tracegate",                                        \
    "warning: tracegate-probes does not act on some fields of a data "        \
    "source's config; the data source and the fields follow")                 \
  X(SNAPSHOT_FAILED, 1035, "tracegate",                                       \
    "a CLONE_SNAPSHOT trigger's snapshot failed (or cannot be watched for); " \
    "the snapshot's number, the trigger and the reason follow")               \
  X(TRIGGER_WAITING, 1036, "tracegate",                                       \
    "the progress line of a session armed for a trigger: the trigger names, " \
    "the time waited and the timeout")                                        \
  X(SNAPSHOT_NOT_FREED, 1037, "tracegate",                                    \
    "warning: the snapshot's buffers were not freed at once (they are when "  \
    "the connection closes)")                                                 \
  X(BUGREPORT_NOTHING, 1038, "tracegate",                                     \
    "--save-for-bugreport: no session is eligible; nothing saved (exit 0)")   \
  X(BUGREPORT_PATH_TOO_LONG, 1039, "tracegate",                               \
    "--save-all-for-bugreport: the bugreport path is too long (TMPDIR); the " \
    "session id follows")                                                     \
  X(QUERY_FAILED, 1040, "tracegate",                                          \
    "the service's state cannot be queried; the reason follows")              \
  X(BUGREPORT_NAME_REFUSED, 1041, "tracegate",                                \
    "--save-all-for-bugreport: a session's bugreport_filename is not a plain "\
    "file name: that session is not saved")                                   \
  X(BUGREPORT_SAVING, 1042, "tracegate",                                      \
    "--save-all-for-bugreport: a session is saved; its id, score and path "   \
    "follow")                                                                 \
  X(BRIDGE_LISTENING, 1050, "tracegate",                                      \
    "tracegate bridge listens; the ws:// address (with its port) follows")    \
  X(BRIDGE_OPENED, 1051, "tracegate",                                         \
    "bridge #N: a UI's WebSocket was taken; its peer, origin, path and "      \
    "upstream follow")                                                        \
  X(BRIDGE_TLS, 1052, "tracegate",                                            \
    "bridge #N: the TLS session to a relay is up; the relay's identity and "  \
    "the cipher suite follow")                                                \
  X(BRIDGE_REFUSED, 1053, "tracegate",                                        \
    "bridge: a request was refused before the upgrade; the peer, origin, "    \
    "path, HTTP status and reason follow")                                    \
  X(BRIDGE_CLOSED, 1054, "tracegate",                                         \
    "bridge #N closed without a recorded reason; its counters follow "        \
    "(ui_bytes= ui_frames= service_bytes= service_frames= ui_waits= "         \
    "service_waits=)")                                                        \
  X(BRIDGE_UI_CLOSED, 1055, "tracegate",                                      \
    "bridge #N closed: the UI closed the WebSocket (its close code follows); "\
    "then the counters")                                                      \
  X(BRIDGE_UI_GONE, 1056, "tracegate",                                        \
    "bridge #N closed: the WebSocket ended without a close from the UI")      \
  X(BRIDGE_SERVICE_CLOSED, 1057, "tracegate",                                 \
    "bridge #N closed: the service closed its connection")                    \
  X(BRIDGE_SERVICE_FAILED, 1058, "tracegate",                                 \
    "bridge #N closed: the service connection failed; the reason follows")    \
  X(BRIDGE_RELAY_CLOSED, 1059, "tracegate",                                   \
    "bridge #N closed: the relay closed its connection")                      \
  X(BRIDGE_RELAY_FAILED, 1060, "tracegate",                                   \
    "bridge #N closed: the relay connection failed; the reason follows")      \
  X(BRIDGE_TEXT_MESSAGE, 1061, "tracegate",                                   \
    "bridge #N closed: the UI sent a text message (the protocol is binary)")  \
  X(BRIDGE_MESSAGE_TOO_BIG, 1062, "tracegate",                                \
    "bridge #N closed: the UI sent a message or an IPC frame over the limit") \
  X(BRIDGE_UNMASKED, 1063, "tracegate",                                       \
    "bridge: a client frame without the mask bit (RFC 6455 5.1) closed the "  \
    "connection before it reached the service")                               \
  X(BRIDGE_BAD_REQUEST, 1064, "tracegate",                                    \
    "bridge: a client's request head was too long or the upgrade came "       \
    "before its end: closed")                                                 \
  X(BRIDGE_BUSY, 1065, "tracegate",                                           \
    "bridge: a client was refused: too many connections open")                \
  X(BRIDGE_STOPPING, 1066, "tracegate",                                       \
    "bridge #N closed: the bridge is stopping (SIGINT, SIGTERM)")             \
  X(BRIDGE_FAILED, 1067, "tracegate",                                         \
    "bridge #N closed on a local failure (out of memory, a write or a "       \
    "forward that failed); the reason follows")                               \
  X(SYMBOLIZE_TIMED_OUT, 1068, "tracegate",                                   \
    "tracegate symbolize stopped at --timeout: OUT was not written; the "     \
    "trace and the timeout follow")                                           \
  X(SYMBOLIZE_REFUSED, 1069, "tracegate",                                     \
    "warning: tracegate symbolize did not open files the trace named (a "     \
    "'..' component, under /proc, /sys or /dev, not a regular file) or "      \
    "left debuginfod lookups past a cap unmade; the counts per reason "       \
    "follow (--json: refused, debuginfod)")                                   \
  X(PROFILE_HOST_NEEDED, 1070, "tracegate",                                   \
    "the trace holds CPU profiles of several hosts: name one with --host H "  \
    "(its name or machine id) or --host all; the hosts follow")               \
  X(PROFILE_NO_SUCH_HOST, 1071, "tracegate",                                  \
    "--host names no host with CPU profile samples in the trace; the hosts "  \
    "that have some follow")                                                  \
  X(PROFILE_UNNAMED, 1072, "tracegate",                                       \
    "note: samples of the profile have no callstack, a callstack that was "   \
    "not interned, an unnamed frame or were past a bound: they are counted "  \
    "and kept as such (docs/profiles.md); the counts follow")                 \
  X(FLEET_RECONNECTED, 2001, "tracegate",                                     \
    "a host's link came back: the session was re-attached; the time down "    \
    "follows")                                                                \
  X(FLEET_RESENT, 2002, "tracegate",                                          \
    "after a link loss the relay sent again what the loss took: nothing "     \
    "lost in transit")                                                        \
  X(FLEET_TRANSIT_LOSS, 2003, "tracegate",                                    \
    "after a link loss part of what was in transit was no longer held by "    \
    "the relay: lost, counted in the summary")                                \
  X(FLEET_PLAIN, 2004, "tracegate",                                           \
    "note: the relay refused compression: what it sends stays plain; the "    \
    "reason follows")                                                         \
  X(FLEET_CLOCKS, 2005, "tracegate",                                          \
    "summary of many hosts: how closely their clocks were aligned at the "    \
    "start (median, worst, and how many hosts had no clock sync)")            \
  X(FLEET_OPTIONS_INVALID, 2006, "tracegate",                                 \
    "the per-user TLS defaults file ($XDG_CONFIG_HOME/tracegate/config) "     \
    "cannot be read or does not parse; FILE:LINE and the reason follow")      \
  X(FLEET_KEYS_FILE, 2007, "tracegate",                                       \
    "the hosts' resume keys go to a file, a line per host (HOST KEY); its "   \
    "path follows")                                                           \
  X(FLEET_KEYS_UNWRITABLE, 2008, "tracegate",                                 \
    "warning: the resume keys file cannot be written; the path and the "      \
    "reason follow")                                                          \
  X(FLEET_RESUME_KEY, 2009, "tracegate",                                      \
    "a host's resume key (for record -H HOST --attach KEY); the host and "    \
    "the key follow")                                                         \
  X(FLEET_ALL_TRACING, 2010, "tracegate",                                     \
    "every host of the fleet is tracing; the time from the start follows")    \
  X(FLEET_ABORTING, 2011, "tracegate",                                        \
    "a second Ctrl-C with a fleet: the sessions are ended and nothing is "    \
    "written; a third Ctrl-C quits at once")                                  \
  X(FLEET_LINK_LOST, 2012, "tracegate",                                       \
    "a host's link was lost; reconnecting (the reason follows)")              \
  X(FLEET_LINK_DEAD, 2013, "tracegate",                                       \
    "a host's link was silent past its deadline: closed as dead")             \
  X(FLEET_RELAY_RESTARTED, 2014, "tracegate",                                 \
    "after a link loss: the relay was restarted, what it had not delivered "  \
    "cannot be sent again")                                                   \
  X(FLEET_KEY_REFUSED, 2015, "tracegate",                                     \
    "warning: the relay refused the resume key: a lost link will end this "   \
    "host's recording")                                                       \
  X(FLEET_NO_CLOCK_SYNC, 2016, "tracegate",                                   \
    "warning: no clock sync with a host: a merged trace cannot align it")     \
  X(FLEET_NO_HOST_INFO, 2017, "tracegate",                                    \
    "warning: the host's relay gave no host info")                            \
  X(FLEET_NOT_A_RELAY, 2018, "tracegate",                                     \
    "warning: the peer is not a tracegate-relay: no host info, no clock "     \
    "alignment, no resume after a link loss")                                 \
  X(FLEET_SUMMARY, 2019, "tracegate",                                         \
    "the end-of-run summary begins: the number of hosts and the time; a "     \
    "line per host follows")                                                  \
  X(FLEET_HOST_OK, 2020, "tracegate",                                         \
    "summary: a host that recorded (HOST: first); bytes, packets and its "    \
    "file or machine id follow")                                              \
  X(FLEET_HOST_FAILED, 2021, "tracegate",                                     \
    "summary: a host that failed (HOST: first); the reason, what was "        \
    "received, and a partial trace's path follow")                            \
  X(FLEET_PLAIN_NOT_ASKED, 2023, "tracegate",                                 \
    "summary, under a host: its trace came plain: --compress none")           \
  X(FLEET_PLAIN_REFUSED, 2024, "tracegate",                                   \
    "summary, under a host: its trace came plain: the relay refused "         \
    "compression (its --compress never)")                                     \
  X(FLEET_PLAIN_UNSUPPORTED, 2025, "tracegate",                               \
    "summary, under a host: its trace came plain: the peer cannot compress "  \
    "(not a tracegate-relay, or an older one)")                               \
  X(FLEET_HOST_INFO, 2026, "tracegate",                                       \
    "summary, under a host: its host name, kernel and clock offset")          \
  X(FLEET_HOST_RECONNECTS, 2027, "tracegate",                                 \
    "summary, under a host: how often its link came back, the time down, "    \
    "the last reason")                                                        \
  X(FLEET_READS_LOST, 2028, "tracegate",                                      \
    "summary, under a host: reads cut by a link loss whose data the relay "   \
    "could not send again (lost)")                                            \
  X(FLEET_MALFORMED, 2029, "tracegate",                                       \
    "summary, under a host: packets left out of the merged trace because "    \
    "they do not decode or trace processor cannot take them")                 \
  X(FLEET_NOT_ALLOWED, 2070, "tracegate",                                     \
    "summary, under a host: of the packets left out, those with a field no "  \
    "Linux producer writes (the merge's allowlist); how many and the last "   \
    "field (its message and number) follow")                                  \
  X(FLEET_CLOCK_UNPLACED, 2071, "tracegate",                                  \
    "summary, under a host: of the packets left out, those whose times "      \
    "trace processor could not place on the host's clocks")                  \
  X(FLEET_QUIET_HOSTS, 2030, "tracegate",                                     \
    "summary of many hosts: those with no loss and no reconnection, counted " \
    "on one line")                                                            \
  X(FLEET_TLS_HANDSHAKES, 2031, "tracegate",                                  \
    "summary: TLS handshakes, full and resumed from a saved session")         \
  X(FLEET_FAILED_HOSTS, 2032, "tracegate",                                    \
    "summary: how many hosts failed, and which")                              \
  X(SNAPSHOT_REPLY_TOO_BIG, 2060, "tracegate",                                \
    "snapshot (or snapshot get): the collector's reply is larger than the "   \
    "most the command takes; the request failed (exit 1); the limit follows " \
    "in MiB and in bytes")                                                    \
  X(FLEET_SESSION_NOT_FREED, 2039, "tracegate",                               \
    "warning: a host's trace is whole but its session was not freed; the "    \
    "host keeps it until its disconnect lease runs out (the reason follows)") \
  X(REMOTE_UNREACHABLE, 2038, "tracegate",                                    \
    "query, stats or bridge with -H: cannot connect to the host that "        \
    "follows; the reason (often with a relay's or TLS code) follows")         \
  X(FLEET_STATE_EDGE, 2048, "tracegate",                                      \
    "summary, under a host: packets before their sequence's first clear of "  \
    "incremental state were left out of the merged trace (the oldest edge "   \
    "of a ring, not a loss); the count follows")                              \
  X(FLEET_STATE_LOST, 2049, "tracegate",                                      \
    "summary, under a host: packets that need incremental state their "       \
    "sequence no longer has (no clear since, or lost data) were left out "    \
    "of the merged trace and counted as loss; the count follows")             \
  X(FLEET_CLOCK_FROM_REQUESTS, 2072, "tracegate",                             \
    "record --merge: the merged trace's hosts were placed by the requests "   \
    "between them (docs/merge.md, \"Clocks from requests\"); the hosts "     \
    "moved and the requests used follow")                                     \
  X(FLEET_RECLOCK_FAILED, 2073, "tracegate",                                  \
    "record --merge: placing the hosts by their requests failed; the merged " \
    "trace is kept as ClockSync placed it; the reason follows")               \
  X(SNAPSHOT_IMPORTS, 2080, "tracegate",                                      \
    "snapshot check: the stored snapshot's whole trace imports into the "     \
    "trace processor named; the snapshot's id follows")                       \
  X(SNAPSHOT_DOES_NOT_IMPORT, 2081, "tracegate",                              \
    "snapshot check: the trace processor named cannot import the stored "     \
    "snapshot's whole trace; how it failed and its error follow, then each "  \
    "host's part is checked")                                                 \
  X(SNAPSHOT_PART_FAILS, 2082, "tracegate",                                   \
    "snapshot check: this host's part of the snapshot (the head and its "     \
    "packets) does not import alone; the host, how it failed and the trace "  \
    "processor's error follow")                                               \
  X(SNAPSHOT_NO_HOST_FAILS, 2083, "tracegate",                                \
    "snapshot check: the whole trace fails but every host's part imports "    \
    "alone (exit 4)")                                                         \
  X(TLS_FAILED, 2033, "tracegate",                                            \
    "the TLS handshake with a relay failed; the TLS library's reason "        \
    "follows")                                                                \
  X(TLS_CLIENT_CERT_REFUSED, 2034, "tracegate",                               \
    "the relay did not accept this client's certificate (not signed by its "  \
    "CA, revoked or expired)")                                                \
  X(TLS_RELAY_NAME_MISMATCH, 2035, "tracegate",                               \
    "the relay's certificate is not for the host name dialed "                \
    "(--tls-server-name)")                                                    \
  X(TLS_RELAY_CERT_EXPIRED, 2036, "tracegate",                                \
    "the relay's certificate has expired")                                    \
  X(TLS_RELAY_CA_MISMATCH, 2037, "tracegate",                                 \
    "the relay's certificate is not signed by the CA given with --ca (or "    \
    "the setting that follows)")                                              \
  X(RELAY_CONNECTED, 4001, "tracegate-relay",                                 \
    "IDENTITY@ADDR: a client was admitted; its role (and whether TLS was "    \
    "resumed) follow")                                                        \
  X(RELAY_REFUSED, 4002, "tracegate-relay",                                   \
    "IDENTITY@ADDR (- when unverified): a connection was refused; the "       \
    "reason follows (the audit trail has it too)")                            \
  X(RELAY_BUSY, 4003, "tracegate-relay",                                      \
    "-@ADDR: a connection was refused: --max-conns connections are open")     \
  X(RELAY_STALE_CLOSED, 4004, "tracegate-relay",                              \
    "-@ADDR: a connection still unverified was closed to make room for a "    \
    "newer one (--max-conns)")                                                \
  X(RELAY_CLOSED, 4005, "tracegate-relay",                                    \
    "IDENTITY@ADDR: an admitted connection closed; its age, reason and frame "\
    "counts follow")                                                          \
  X(RELAY_LINK_LOST, 4006, "tracegate-relay",                                 \
    "IDENTITY@ADDR: the link was lost while a session traced: the relay "     \
    "detaches it under the resume key that follows")                          \
  X(RELAY_SESSION_DETACHED, 4007, "tracegate-relay",                          \
    "IDENTITY@ADDR: the session was detached under the key that follows: a "  \
    "new connection can take it back")                                        \
  X(RELAY_DETACH_FAILED, 4008, "tracegate-relay",                             \
    "IDENTITY@ADDR: the session could not be detached (the reason follows); " \
    "it ended")                                                               \
  X(RELAY_CALL_DENIED, 4009, "tracegate-relay",                               \
    "IDENTITY@ADDR: a call was denied by the client's role; the method and "  \
    "reason follow")                                                          \
  X(RELAY_FRAME_DROPPED, 4010, "tracegate-relay",                             \
    "IDENTITY@ADDR: a frame was dropped (garbage, or not for the client)")    \
  X(RELAY_SHUTDOWN, 4011, "tracegate-relay",                                  \
    "SIGTERM or SIGINT: the relay closes its connections and exits")          \
  X(RELAY_RELOADED, 4012, "tracegate-relay",                                  \
    "SIGHUP: the authorization file was reloaded; its identities counted")    \
  X(RELAY_CRL_RELOADED, 4013, "tracegate-relay",                              \
    "SIGHUP: the CRL was reloaded")                                           \
  X(RELAY_RELOAD_FAILED, 4014, "tracegate-relay",                             \
    "SIGHUP: a file did not load (authz, CRL, audit log): the previous one "  \
    "stays; the reason follows")                                              \
  X(RELAY_PAUSED_SERVICE, 4015, "tracegate-relay",                            \
    "debug: the client's queue is past its high-water mark: the relay stops " \
    "reading the service")                                                    \
  X(RELAY_RESUMED_SERVICE, 4016, "tracegate-relay",                           \
    "debug: the client's queue drained: the relay reads the service again")   \
  X(RELAY_PAUSED_CLIENT, 4017, "tracegate-relay",                             \
    "debug: the service's queue is past its high-water mark: the relay "      \
    "stops reading the client")                                               \
  X(RELAY_RESUMED_CLIENT, 4018, "tracegate-relay",                            \
    "debug: the service's queue drained: the relay reads the client again")   \
  X(RELAY_NOT_AUTHORIZED, 4019, "tracegate-relay",                            \
    "told to the client, which shows it: its certificate's identity (that "   \
    "follows) is not in the relay's authorization file")                      \
  X(RELAY_NO_SERVICE, 4020, "tracegate-relay",                                \
    "told to the client: the tracing service on the relay's host is not "     \
    "reachable")                                                              \
  X(RELAY_IDENTITY_LIMIT, 4021, "tracegate-relay",                            \
    "told to the client: its identity already holds "                        \
    "--max-conns-per-identity connections")                                   \
  X(RELAY_SERVICE_GONE, 4022, "tracegate-relay",                              \
    "told to the client: the tracing service closed the relay's connection "  \
    "to it; the reason follows")                                              \
  X(RELAY_SERVICE_CLOSED_EARLY, 4023, "tracegate-relay",                      \
    "told to the client: the tracing service closed the connection before "   \
    "answering (at its --max-consumers limit?)")                              \
  X(RELAY_CALL_ALLOWED, 4024, "tracegate-relay",                              \
    "audit: a call allowed as asked; a note may follow (the resume key, "     \
    "the compression level)")                                                 \
  X(RELAY_KEY_SCOPED, 4025, "tracegate-relay",                                \
    "audit: a Detach or Attach key was put under the caller's identity; "     \
    "the key asked for and the key used follow")                              \
  X(RELAY_SESSION_SCOPED, 4026, "tracegate-relay",                            \
    "audit: a session's name or a clone's source was scoped to the "          \
    "caller's identity; the session follows")                                 \
  X(RELAY_ROLE_DENIES, 4027, "tracegate-relay",                               \
    "audit: a call refused: the client's role does not allow the method; "    \
    "the role and the method follow")                                         \
  X(RELAY_REQUEST_MALFORMED, 4028, "tracegate-relay",                         \
    "audit: a call or frame refused: it does not decode, names an unknown "   \
    "method or service, or its arguments are not valid; why follows")         \
  X(RELAY_REQUEST_ID_REFUSED, 4029, "tracegate-relay",                        \
    "audit: a call refused: its request id is still in flight, or "           \
    "reserved for the relay's own calls")                                     \
  X(RELAY_TOO_MANY_CALLS, 4030, "tracegate-relay",                            \
    "audit: a call refused: too many calls in flight on the connection")      \
  X(RELAY_WRITE_INTO_FILE, 4031, "tracegate-relay",                           \
    "audit: EnableTracing refused: write_into_file or output_path would "     \
    "have the service write a file on the relay's host")                      \
  X(RELAY_SESSION_REFUSED, 4032, "tracegate-relay",                           \
    "audit: a call naming a session refused: the name is not valid, or "      \
    "the session is not the caller's; why follows")                           \
  X(RELAY_SERVICE_GARBAGE, 4033, "tracegate-relay",                           \
    "audit: a frame from the service dropped: it does not decode, or "        \
    "answers no call in flight")                                              \
  X(RELAY_TLS_HANDSHAKE_FAILED, 4034, "tracegate-relay",                      \
    "-@ADDR: a connection refused: the TLS handshake failed (no client "      \
    "certificate, a foreign CA, expired, revoked, not TLS); the TLS "         \
    "library's reason follows")                                               \
  X(RELAY_AUDIT_SUPPRESSED, 4035, "tracegate-relay",                          \
    "audit: lines of denials or of refused connections held back by the "     \
    "rate limit; their number follows")                                       \
  X(RELAY_CLIENT_CLOSED, 4036, "tracegate-relay",                             \
    "audit: disconnect: the client closed the connection")                    \
  X(RELAY_IDLE_CLOSED, 4037, "tracegate-relay",                               \
    "audit: disconnect: the client's link was silent past its deadline")      \
  X(RELAY_LEASE, 4038, "tracegate-relay",                                     \
    "audit: the service's answer to the relay's disconnect lease (allow: "    \
    "it keeps the session past a lost connection, for how long)")             \
  X(RELAY_CALL_REFUSED, 4039, "tracegate-relay",                              \
    "audit: a TracegateRelay call refused (no resume key set, nothing to "    \
    "resume, host facts unavailable, ...); why follows")                      \
  X(SERVICE_CONFIG_REFUSED, 3001, "tracegated",                               \
    "EnableTracing refused: the config is not valid; the field at fault "     \
    "(buffers[0].size_kb, data_sources[1].config.target_buffer, ...) and "    \
    "why follow, in the reply's error (tracegate shows it)")                  \
  X(SERVICE_NO_RESOURCES, 3002, "tracegated",                                 \
    "EnableTracing refused: the service is out of memory or buffer ids")      \
  X(SERVICE_BUSY, 3003, "tracegated",                                         \
    "EnableTracing refused: a session with that unique_session_name is "      \
    "running, or the service's session limit is reached")                     \
  X(SERVICE_SOCKET_IN_USE, 3004, "tracegated",                                \
    "cannot listen: another service answers on the socket that follows; it "  \
    "is left alone (exit 1)")                                                 \
  X(SERVICE_LISTEN_FAILED, 3005, "tracegated",                                \
    "cannot listen on the socket that follows (not a socket, no permission, " \
    "...); the reason follows (exit 1)")                                      \
  X(SERVICE_DS_REFUSED, 3006, "tracegated",                                   \
    "RegisterDataSource refused, in the reply's error: no name, a name "      \
    "taken, too many data sources, or a descriptor over its limit (131029 "   \
    "bytes, 1 MiB per producer)")                                             \
  X(SERVICE_HAS_SESSION, 3007, "tracegated",                                  \
    "EnableTracing or CloneSession refused: this consumer connection "        \
    "already has a tracing session (one per connection)")                     \
  X(SERVICE_NO_SUCH_SESSION, 3008, "tracegated",                              \
    "CloneSession refused: no session of this uid has that id or "            \
    "unique_session_name (or it ended before the snapshot)")                  \
  X(SERVICE_NO_BUGREPORT_SESSION, 3009, "tracegated",                         \
    "CloneSession for a bugreport refused: no running session of this uid "   \
    "has a bugreport_score above 0")                                          \
  X(SERVICE_REQUEST_INVALID, 3010, "tracegated",                              \
    "a consumer's request lacks what it needs (a config, a session "          \
    "selector, an attached session); the field follows")                      \
  X(COLLECTOR_PART_NO_IMPORT, 5070, "tracegate-collector",                   \
    "warning: check_trace_processor: a host's part of a stored snapshot "     \
    "does not import into trace processor; the snapshot, the host, how it "   \
    "failed and trace processor's error follow (also the host row's problem "  \
    "with this code)")                                                        \
  X(COLLECTOR_NO_PART_FAILS, 5071, "tracegate-collector",                     \
    "warning: check_trace_processor: a stored snapshot does not import "      \
    "whole, yet every host's part imports alone; the snapshot and the error " \
    "follow")                                                                 \
  X(COLLECTOR_CHECK_NOT_MADE, 5072, "tracegate-collector",                    \
    "warning: check_trace_processor: a stored snapshot's import check could " \
    "not be made (trace processor not startable, no host index, the queue "   \
    "full); the snapshot and why follow")                                     \
  X(COLLECTOR_SNAPSHOT_IMPORTS, 5073, "tracegate-collector",                  \
    "check_trace_processor: a stored snapshot imports into trace processor; " \
    "its id follows")                                                         \
  X(COLLECTOR_CHECK_SAME_UID, 5074, "tracegate-collector",                   \
    "warning: check_trace_processor: trace processor ran as the "             \
    "collector's own uid, not 65534 (the collector has no CAP_SETUID and "    \
    "CAP_SETGID: not root, not under the shipped systemd unit); only its "    \
    "sandbox kept it from the collector's files; the snapshot and the uid "   \
    "follow (also the \"notice\" of a host row's import problem)")            \
  X(COLLECTOR_SYMBOLIZED, 5094, "tracegate-collector",                       \
    "symbolize: a stored snapshot's symbols are stored beside it (served "    \
    "with its trace and its hosts' parts); the frames named and the modules " \
    "found follow")                                                           \
  X(COLLECTOR_SYMBOLIZE_FAILED, 5095, "tracegate-collector",                  \
    "warning: symbolize: a stored snapshot could not be symbolized (a "       \
    "debug directory unreadable, a damaged trace, symbolize_timeout, the "    \
    "queue full, the store); it stays as stored, its frames unnamed; the "    \
    "snapshot and why follow (also its hosts' rows' problem with this code)") \
  X(COLLECTOR_CONFIG_INVALID, 5001, "tracegate-collector",                    \
    "the collector's config, or the trace config it names, is refused "       \
    "(also by --check-config); FILE:LINE or the file, and why follow "        \
    "(exit 1)")                                                               \
  X(COLLECTOR_HOST_FAILING, 5002, "tracegate-collector",                      \
    "warning: a host failed and is started again every few seconds; the "     \
    "host, the reason and the failure count follow (said again only when "    \
    "the reason changes)")                                                    \
  X(COLLECTOR_HTTP_SOURCE_LIMIT, 5003, "tracegate-collector",                 \
    "warning: an address holds max_conns_per_source connections to the "      \
    "HTTP server: new ones from it are closed; the address and how many "     \
    "follow")                                                                 \
  X(COLLECTOR_HTTP_MAX_CONNS, 5004, "tracegate-collector",                    \
    "warning: the HTTP server holds max_conns connections: new ones are "     \
    "closed; how many, and the latest address, follow")                       \
  X(COLLECTOR_S3_FAILED, 5080, "tracegate-collector",                        \
    "a request to the snapshot bucket failed after its retries; the "        \
    "method, the bucket and object, the HTTP status, S3's error code and "   \
    "message follow")                                                        \
  X(COLLECTOR_S3_RETRYING, 5081, "tracegate-collector",                      \
    "the snapshot bucket throttled (503 SlowDown), failed (5xx) or could "   \
    "not be reached; the request is retried after the delay that follows")   \
  X(COLLECTOR_BUCKET_UNROWED, 5082, "tracegate-collector",                   \
    "a snapshot object in the bucket has no row in the catalog (a lost or "  \
    "new catalog, or a delete cut short): kept, never removed at open; the " \
    "object follows (the first eight, then a count)")                        \
  X(COLLECTOR_REBUILD_REFUSED, 5086, "tracegate-collector",                  \
    "rebuilding the catalog: a snapshot's sidecar could not be read or "     \
    "does not describe its object (missing, another size, ETag or crc32); "  \
    "the id and why follow; its row is FAILED, or absent when the sidecar "  \
    "itself was refused")                                                    \
  X(COLLECTOR_REBUILD_NO_SIDECAR, 5087, "tracegate-collector",               \
    "rebuilding the catalog: a snapshot object in the bucket has no "        \
    "sidecar (stored before sidecars were written, or by another writer): "  \
    "no row is made for it, the object is kept, and its id, which only a "   \
    "verified sidecar may claim, is not reserved; also said once when such " \
    "an id is above every verified one")                                     \
  X(COLLECTOR_HOST_TOO_SLOW, 5050, "tracegate-collector",                     \
    "a snapshot's host read its clone slower than clone_min_rate over "       \
    "clone_timeout and failed for that snapshot; what it sent before stays "  \
    "(partial); the bytes, the span and the floor follow")                    \
  X(COLLECTOR_RING_CLEAR_ADDED, 5020, "tracegate-collector",                  \
    "the flight config has no incremental_state_config: the collector adds "  \
    "one clearing the producers' incremental state every "                    \
    "ring_clear_period, so that a ring that wraps keeps its sequences "       \
    "readable; the period follows")                                           \
  X(COLLECTOR_STATE_LOST, 5021, "tracegate-collector",                        \
    "a snapshot's host: packets that need incremental state their ring no "   \
    "longer holds (no clear since, or lost data) were left out and counted "  \
    "as loss; the host is partial; the counts follow")                        \
  X(COLLECTOR_NOT_ALLOWED, 5060, "tracegate-collector",                       \
    "a snapshot's host: packets with a field no Linux producer writes (the "  \
    "merge's allowlist; merge_allow_fields trusts more) were left out and "   \
    "counted as loss; the host is partial; how many and the last field "      \
    "(its message and number) follow")                                        \
  X(COLLECTOR_CLOCK_UNPLACED, 5061, "tracegate-collector",                    \
    "a snapshot's host: packets whose times trace processor could not "       \
    "place on the host's clocks were left out and counted as loss; the "     \
    "host is partial; how many follow")                                       \
  X(COLLECTOR_APP_TRACKS, 5062, "tracegate-collector",                        \
    "a snapshot's host: packets of its app tracks the merge's joined mode "  \
    "could not put on the collector's machine (a field not allowed there, "  \
    "a time its clock estimate does not cover, pids past the bound, a "      \
    "track uuid another host owns) were left out and counted as loss; the "  \
    "host is partial; how many follow")                                       \
  X(COLLECTOR_FLOW_ENDS_UNMATCHED, 5063, "tracegate-collector",               \
    "a snapshot's host (info): flows (requests across hosts) of its app "    \
    "tracks whose other end is not in the snapshot (its peer not in the "    \
    "inventory or failed, a ring's edge, a request in flight) or past the "  \
    "merge's bound; kept, not a loss, the host not partial; the counts "     \
    "follow")                                                                 \
  X(COLLECTOR_PERF_BOOST_FAILED, 5090, "tracegate-collector",                 \
    "a snapshot's host did not sample at the boost's rate "                   \
    "(perf_boost_window): its boost session could not be reached, was "       \
    "refused or not read in time; the snapshot keeps its ring's profile, "    \
    "the host row's boost says why")                                          \
  X(COLLECTOR_PERF_BOOST_BUDGET, 5091, "tracegate-collector",                 \
    "a snapshot's host was not boosted (perf_boost_window): its own share "   \
    "of perf_boost_budget_window (perf_boost_host_percent) or the hosts' "    \
    "together (perf_boost_fleet_percent) has no room for one more window; "   \
    "the snapshot keeps its ring's profile, the host row's boost says which " \
    "budget, what it used and when it refills")                               \
  X(PROBES_FTRACE_UNAVAILABLE, 6001, "tracegate-probes",                      \
    "linux.ftrace: an instance cannot trace the kernel (writing tracefs "     \
    "needs root or CAP_DAC_OVERRIDE, or the kernel has none); the instance " \
    "and the reason follow")                                                  \
  X(PROBES_UNACTED_FIELDS, 6002, "tracegate-probes",                          \
    "a data source's config sets fields tracegate-probes does not act on; "   \
    "the data source, their number and names follow")                         \
  X(PROBES_SOURCE_MISSING, 6003, "tracegate-probes",                          \
    "linux.sys_stats: a source cannot be read (this kernel may not have it; " \
    "it is skipped); the source and the reason follow")                       \
  X(TLS_CONFIG_INVALID, 7001, "any",                                          \
    "the TLS configuration (--cert, --key, --ca, --crl or the config's "      \
    "keys) is refused; the file and the reason follow")                       \
  X(TLS_FILE_UNREADABLE, 7002, "any",                                         \
    "a TLS file cannot be opened; its role (certificate, key, CA, CRL), path "\
    "and the system's reason follow")                                         \
  X(TLS_KEY_MISMATCH, 7003, "any",                                            \
    "the key file does not match the certificate; both paths follow")         \
  X(TLS_CRL_FOREIGN, 7004, "any",                                             \
    "the CRL that follows is not issued by the configured CA")                \
  X(DS_NOT_STARTED, 7010, "any",                                              \
    "a data source a host was asked for did not start (linux.ftrace: no "     \
    "kernel ring buffer opened, every event refused; any data source whose "  \
    "producer did not confirm its start: the service's "                      \
    "slow_starting_data_sources); the host, the data source and why follow") \
  X(DS_EVENTS_REFUSED, 7011, "any",                                           \
    "a data source runs without some of the events it was asked for (the "    \
    "kernel has none such, or refused to enable them); the host, the data "   \
    "source, how many and their first names follow")                          \
  X(DS_NOT_OFFERED, 7012, "any",                                              \
    "no producer on the host offers a data source the config asks for: it "   \
    "does not run; the host and the data source follow")                      \
  X(PERF_CONFIG_REFUSED, 8001, "tracegate-perf",                             \
    "linux.perf: the PerfEventConfig asks for what this producer cannot "     \
    "do; nothing is recorded for the session; the field and the reason "      \
    "follow")                                                                 \
  X(PERF_OPEN_FAILED, 8002, "tracegate-perf",                                 \
    "linux.perf: perf_event_open refused the timebase or a follower (a "      \
    "hardware counter this machine lacks, or a missing privilege: "           \
    "CAP_PERFMON, perf_event_paranoid); nothing is recorded; the CPU, the "   \
    "event and the reason follow")                                            \
  X(PERF_FIELDS_IGNORED, 8003, "tracegate-perf",                              \
    "linux.perf: a PerfEventConfig field of traced_perf's unwinder has no "   \
    "meaning here and is ignored; the field follows")                         \
  X(PERF_DATA_LOSS, 8004, "tracegate-perf",                                   \
    "linux.perf: at a session's end, records the kernel dropped (ring full) " \
    "or throttled samples, or samples the unwinder's queue had no room for "  \
    "(max_enqueued_footprint_kb); the counts follow")                         \
  X(PERF_USER_FRAMES_DEFAULT, 8005, "tracegate-perf",                         \
    "linux.perf: callstack_sampling.user_frames is unset: user frames are "   \
    "walked by frame pointer (traced_perf would unwind DWARF, which this "    \
    "build does not)")                                                        \
  X(PERF_MEMORY_GUARDRAIL, 8009, "tracegate-perf",                            \
    "linux.perf: the producer's memory (RssAnon and swap) passed the "        \
    "config's max_daemon_memory_kb: the unwinder's caches are dropped, and "  \
    "when still above a second later the session stops sampling, as "         \
    "traced_perf's guardrail does; the figures follow")                       \
  X(PERF_FILES_REFUSED, 8012, "tracegate-perf",                               \
    "linux.perf: at a session's end, files behind processes' mappings were "  \
    "not read: not a regular file (a FIFO, socket or device put at the "      \
    "path), another file than the one mapped, or a path leading out of the "  \
    "process's root; their frames keep no function name or build id; the "    \
    "counts by reason follow")                                                \
  X(PERF_CONFINED, 8020, "tracegate-perf",                                    \
    "tracegate-perf confined itself at start: its seccomp filter refuses "    \
    "the calls that reach into another process (process_vm_writev and "       \
    "_readv, ptrace, pidfd_getfd, process_madvise, kcmp)")                    \
  X(PERF_CONFINE_FAILED, 8022, "tracegate-perf",                              \
    "tracegate-perf cannot install its seccomp filter (or set "               \
    "no_new_privs) and does not start: a profiler with CAP_SYS_PTRACE must "  \
    "not run unconfined; the reason follows")

typedef enum tg_notice {
  TG_N_NONE = 0, /* a line without a code */
#define TG__NOTICE_ENUM(name, num, prog, meaning) TG_N_##name = (num),
  TG_NOTICE_MAP(TG__NOTICE_ENUM)
#undef TG__NOTICE_ENUM
} tg_notice_t;

/* "[TG-1003]": a static string, owned by the library. TG_N_NONE, or a
 * value not in the table, gives "[TG-0000]". */
const char *tg_notice_tag(tg_notice_t n);

/* Puts |n|'s tag and a space before the text in |buf| (|cap| bytes, a
 * NUL-terminated string), cutting the text's end if it must: for a reason
 * written by one module that another sends on. */
void tg_notice_prefix(char *buf, size_t cap, tg_notice_t n);

/* "|n|'s tag, a space, |text|" into |buf| (|cap| bytes, cut to fit);
 * returns |buf| (or "" when |cap| is 0): a coded reason to send on. */
const char *tg_notice_coded(char *buf, size_t cap, tg_notice_t n,
                            const char *text);

/* The tag of TG_N_|name|, for a format's "%s". */
#define TG_NOTE(name) tg_notice_tag(TG_N_##name)

#endif /* TRACEGATE_COMMON_NOTICE_H */
