#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# A real S3 gateway for the tests: Debian's Ceph (ceph-mon, ceph-osd,
# radosgw) on loopback, with cephx, in one directory, nothing outside it.
#   ceph_rgw.sh start DIR   one monitor, one OSD keeping its objects in
#                           memory (memstore), no manager, radosgw on a free
#                           loopback port; an S3 user; then writes
#                             DIR/endpoint     http://127.0.0.1:PORT
#                             DIR/credentials  AWS_ACCESS_KEY_ID=...
#                                              AWS_SECRET_ACCESS_KEY=...
#                                              (mode 0600)
#                           and exits 0 once the gateway answers S3 requests;
#                           exits 77 when the Ceph programs are missing, 1 on
#                           any other failure (after stopping what it started).
#                           With CEPH_RGW_OWNER=PID, a watcher stops the
#                           gateway and removes DIR once process PID is
#                           gone: a test that crashes leaves nothing running.
#   ceph_rgw.sh stop DIR    stops the daemons it started there (by their pid
#                           files) and removes DIR.
# The monitor proposes every 0.1 s instead of every second: the gateway
# creates its pools one by one at its first start, and each waits for a
# proposal.
# Sized for a few shared cores (docs/operations.md, "The bucket store
# beside the directory"): the OSD runs 2 op shards of 1 thread (5 by
# default) without its op tracker, radosgw 64 request threads (512), and
# radosgw writes RADOS objects of 8 MiB (4), half the operations per byte.
# Together they take about a seventh off the gateway's CPU time for a
# multipart upload. The messenger's checksums, cephx and the debug levels
# stay as they are: turning them off saved no measurable time.
set -eu

cmd="${1:-}"
dir="${2:-}"
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: ceph_rgw.sh start|stop DIR" >&2
  exit 2
fi

stop_daemons() {
  for name in rgw osd mon; do
    pidf="$dir/run/$name.pid"
    [ -f "$pidf" ] || continue
    pid=$(cat "$pidf" 2>/dev/null || true)
    case "$pid" in ''|*[!0-9]*) continue ;; esac
    kill -TERM "$pid" 2>/dev/null || true
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
      sleep 0.1
      i=$((i + 1))
    done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$pidf"
  done
}

if [ "$cmd" = stop ]; then
  [ -d "$dir" ] || exit 0
  stop_daemons
  rm -rf "$dir"
  exit 0
fi
if [ "$cmd" != start ]; then
  echo "ceph_rgw.sh: unknown command: $cmd (start or stop)" >&2
  exit 2
fi

for prog in ceph-mon ceph-osd radosgw radosgw-admin ceph ceph-authtool \
            monmaptool python3; do
  if ! command -v "$prog" >/dev/null 2>&1; then
    echo "ceph_rgw.sh: $prog is missing (deploy/deps.sh installs ceph-mon," \
         "ceph-osd and radosgw)" >&2
    exit 77
  fi
done

fail() {
  echo "ceph_rgw.sh: $*" >&2
  for f in "$dir"/log/*.log; do
    [ -f "$f" ] || continue
    echo "--- $f (end)" >&2
    tail -n 20 "$f" >&2
  done
  stop_daemons
  exit 1
}

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
mkdir -p "$dir/mon" "$dir/osd" "$dir/run" "$dir/log" "$dir/rgw"

# Two free loopback ports, released just before the daemons bind them.
ports=$(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))
')
mon_port=${ports% *}
rgw_port=${ports#* }
fsid=$(python3 -c 'import uuid; print(uuid.uuid4())')
osd_uuid=$(python3 -c 'import uuid; print(uuid.uuid4())')
conf="$dir/ceph.conf"

cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = v1:127.0.0.1:$mon_port
public addr = 127.0.0.1
ms bind ipv6 = false
ms bind msgr2 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $dir/\$name.keyring
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
mon data = $dir/mon
osd data = $dir/osd
osd objectstore = memstore
memstore device bytes = 2147483648
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 2
mon data avail crit = 1
paxos propose interval = 0.1
osd heartbeat grace = 60
osd op num shards = 2
osd op num threads per shard = 1
osd enable op tracker = false
[mon]
keyring = $dir/mon/keyring
[client.rgw.gw]
rgw frontends = beast endpoint=127.0.0.1:$rgw_port
rgw data = $dir/rgw
rgw dns name = 127.0.0.1
rgw thread pool size = 64
rgw max chunk size = 8388608
rgw obj stripe size = 8388608
EOF

kr() { ceph-authtool "$@" >/dev/null; }
kr --create-keyring "$dir/mon..keyring" --gen-key -n mon. --cap mon 'allow *'
kr --create-keyring "$dir/client.admin.keyring" --gen-key -n client.admin \
  --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *'
kr "$dir/mon..keyring" --import-keyring "$dir/client.admin.keyring"
monmaptool --create --fsid "$fsid" --addv a "[v1:127.0.0.1:$mon_port]" \
  "$dir/monmap" >/dev/null
ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" \
  --keyring "$dir/mon..keyring" >"$dir/log/mkfs.log" 2>&1 ||
  fail "mon --mkfs failed"
ceph-mon -c "$conf" -i a --pid-file "$dir/run/mon.pid" ||
  fail "the monitor did not start"

c() { timeout 30 ceph -c "$conf" -n client.admin "$@"; }

# The OSD: its key first, then its id from the monitor, then its store.
kr --create-keyring "$dir/osd.0.keyring" --gen-key -n osd.0
osd_key=$(ceph-authtool -p -n osd.0 "$dir/osd.0.keyring")
printf '{"cephx_secret": "%s"}\n' "$osd_key" >"$dir/osd-secrets.json"
osd_id=$(c osd new "$osd_uuid" -i "$dir/osd-secrets.json") ||
  fail "osd new failed"
[ "$osd_id" = 0 ] || fail "the monitor gave the OSD id $osd_id, not 0"
ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid" >/dev/null 2>&1 ||
  fail "osd --mkfs failed"
ceph-osd -c "$conf" -i 0 --pid-file "$dir/run/osd.pid" >/dev/null 2>&1 ||
  fail "the OSD did not start"

kr --create-keyring "$dir/client.rgw.gw.keyring" --gen-key -n client.rgw.gw
c auth add client.rgw.gw mon 'allow rw' osd 'allow rwx' \
  -i "$dir/client.rgw.gw.keyring" >/dev/null 2>&1 ||
  fail "the gateway's key was refused"
radosgw -c "$conf" -n client.rgw.gw --pid-file "$dir/run/rgw.pid" \
  >/dev/null 2>&1 || fail "radosgw did not start"

# The gateway answers once its pools exist; the user is made after that.
i=0
until python3 -c '
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], timeout=2)
except urllib.error.HTTPError:
    pass
' "http://127.0.0.1:$rgw_port/" 2>/dev/null; do
  i=$((i + 1))
  [ $i -lt 600 ] || fail "the gateway did not answer in 60 s"
  sleep 0.1
done

user=$(timeout 60 radosgw-admin -c "$conf" -n client.admin user create \
  --uid=tracegate --display-name=tracegate 2>/dev/null) ||
  fail "radosgw-admin user create failed"
umask 077
printf '%s\n' "$user" | python3 -c '
import json, sys
k = json.load(sys.stdin)["keys"][0]
print("AWS_ACCESS_KEY_ID=" + k["access_key"])
print("AWS_SECRET_ACCESS_KEY=" + k["secret_key"])
' >"$dir/credentials" || fail "no keys in radosgw-admin's answer"
printf 'http://127.0.0.1:%s\n' "$rgw_port" >"$dir/endpoint"
owner="${CEPH_RGW_OWNER:-}"
case "$owner" in
  ''|*[!0-9]*) ;;
  *)
    # Detached from the caller's stdout (a test harness waits for it to
    # close), polling the owner.
    (
      while kill -0 "$owner" 2>/dev/null && [ -d "$dir" ]; do sleep 1; done
      if [ -d "$dir" ]; then stop_daemons; rm -rf "$dir"; fi
    ) </dev/null >/dev/null 2>&1 &
    ;;
esac
exit 0
