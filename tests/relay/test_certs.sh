#!/bin/sh
# tg-certs end to end: every subcommand, checked with openssl itself.
# usage: test_certs.sh PATH/TO/tg-certs
set -eu
TOOL=$1
T=$(mktemp -d /tmp/tg-test-certs-XXXXXX)
trap 'rm -rf "$T"' EXIT INT TERM
cd "$T"
certs() { sh "$TOOL" "$@"; }
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
expect_fail() {
  # expect_fail "message part" args...
  want=$1
  shift
  if out=$(certs "$@" 2>&1); then fail "tg-certs $* succeeded"; fi
  case "$out" in
    *"$want"*) ;;
    *) fail "tg-certs $*: '$out' does not say '$want'" ;;
  esac
}

certs --help | grep -q "usage: tg-certs" || fail "--help"
expect_fail "is not a tg-certs CA directory" host nodir relay
expect_fail "unknown command" frob pki

certs ca pki >/dev/null
[ -f pki/ca.pem ] && [ -f pki/ca.key ] && [ -f pki/crl.pem ] || fail "ca files"
[ "$(stat -c %a pki/ca.key)" = 600 ] || fail "ca.key is not private"
openssl x509 -in pki/ca.pem -noout -text | grep -q "CA:TRUE" || fail "ca is no CA"
openssl x509 -in pki/ca.pem -noout -text | grep -q "prime256v1\|P-256" ||
  fail "ca key is not P-256"
certs ca pki | grep -q "keeping" || fail "ca twice"

certs host pki relay.test --ip 127.0.0.1 --ip ::1 --days 30 >/dev/null
openssl verify -CAfile pki/ca.pem pki/relay.test.pem >/dev/null || fail "host verify"
txt=$(openssl x509 -in pki/relay.test.pem -noout -text)
case "$txt" in *"DNS:relay.test, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1"*) ;;
  *) fail "host SAN" ;; esac
case "$txt" in *"TLS Web Server Authentication"*) ;; *) fail "host EKU" ;; esac
openssl x509 -in pki/relay.test.pem -noout -checkend $((31 * 86400)) >/dev/null &&
  fail "--days 30 not honoured"
openssl x509 -in pki/relay.test.pem -noout -checkend $((29 * 86400)) >/dev/null ||
  fail "--days 30 too short"

certs client pki alice --role observe >/dev/null
certs client pki alice --role record >/dev/null
certs client pki dave --role observe >/dev/null
grep -qx "alice record" pki/authz || fail "authz alice record"
grep -q "^alice observe" pki/authz && fail "authz kept the old role"
grep -qx "dave observe" pki/authz || fail "authz dave"
openssl x509 -in pki/alice.pem -noout -subject | grep -q "CN = alice" || fail "client CN"
openssl x509 -in pki/alice.pem -noout -text | grep -q "TLS Web Client Authentication" ||
  fail "client EKU"
expect_fail "is not observe or record" client pki x --role admin
expect_fail "invalid name" client pki "../x"
expect_fail "invalid name" client pki ca
expect_fail "--ip is for the host command" client pki y --ip 1.2.3.4

certs client pki old --expired >/dev/null
openssl verify -CAfile pki/ca.pem pki/old.pem >/dev/null 2>&1 && fail "expired verifies"

certs client pki bob >/dev/null
openssl verify -crl_check -CRLfile pki/crl.pem -CAfile pki/ca.pem pki/bob.pem \
  >/dev/null || fail "bob before revoke"
certs revoke pki bob >/dev/null
openssl verify -crl_check -CRLfile pki/crl.pem -CAfile pki/ca.pem pki/bob.pem \
  >/dev/null 2>&1 && fail "bob verifies after revoke"
certs revoke pki bob | grep -q "already revoked" || fail "revoke twice"
expect_fail "nothing to revoke" revoke pki nobody
openssl verify -crl_check -CRLfile pki/crl.pem -CAfile pki/ca.pem pki/alice.pem \
  >/dev/null || fail "alice after bob's revocation"

certs crl pki --days 7 >/dev/null
openssl crl -in pki/crl.pem -noout -nextupdate >/dev/null || fail "crl"
echo "test_certs: ok"
