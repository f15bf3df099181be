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

# p12: a pass file others may read is refused, and nothing is written.
printf 'correct horse\n' >pass
chmod 644 pass
expect_fail "chmod 600" p12 pki alice --pass-file pass
[ ! -e pki/alice.p12 ] || fail "p12 written with a readable pass file"
chmod 640 pass
expect_fail "chmod 600" p12 pki alice --pass-file pass
chmod 600 pass
# A link planted where the old fixed temporary name was is not written
# through; nor one at the bundle's own name.
: >victim
ln -s "$T/victim" pki/alice.p12.new
ln -s "$T/victim-new" pki/dave.p12
certs p12 pki alice --pass-file pass >/dev/null
certs p12 pki dave --pass-file pass >/dev/null
[ -s victim ] && fail "p12 wrote through a planted NAME.p12.new link"
[ -e victim-new ] && fail "p12 wrote through a planted NAME.p12 link"
[ -L pki/dave.p12 ] && fail "p12 left the planted link in place"
[ -f pki/dave.p12 ] || fail "p12 did not write dave.p12"
[ "$(stat -c %a pki/alice.p12)" = 600 ] || fail "alice.p12 is not private"
ls -a pki | grep -q '^\.alice\.p12\.' && fail "p12 left a temporary file"
# AES-256-CBC under PBKDF2 and a SHA-256 MAC, each at 600000 iterations.
info=$(openssl pkcs12 -info -noout -in pki/alice.p12 -passin file:pass 2>&1) ||
  fail "openssl cannot read alice.p12: $info"
case "$info" in *"MAC: sha256, Iteration 600000"*) ;; *) fail "p12 MAC: $info" ;; esac
n=$(printf '%s\n' "$info" | grep -c "PBES2, PBKDF2, AES-256-CBC, Iteration 600000")
[ "$n" = 2 ] || fail "p12 key and certificate PBE: $info"
certs p12 pki alice --pass-file pass | grep -q "keeping" || fail "p12 twice"
# --compat: 3DES and SHA-1 for old keychains, the iterations all the same.
certs p12 pki alice --pass-file pass --compat --force >/dev/null
info=$(openssl pkcs12 -info -noout -in pki/alice.p12 -passin file:pass 2>&1) ||
  fail "openssl cannot read the --compat alice.p12: $info"
case "$info" in *"MAC: sha1, Iteration 600000"*) ;; *) fail "--compat MAC: $info" ;; esac
case "$info" in *"pbeWithSHA1And3-KeyTripleDES-CBC, Iteration 600000"*) ;;
  *) fail "--compat PBE: $info" ;; esac

# A key is not written through a link planted at the old temporary name.
ln -s "$T/victim-key" pki/erin.key.new
certs client pki erin >/dev/null
[ -e victim-key ] && fail "client wrote its key through a planted link"
[ "$(stat -c %a pki/erin.key)" = 600 ] || fail "erin.key is not private"
openssl verify -CAfile pki/ca.pem pki/erin.pem >/dev/null || fail "erin verify"
echo "test_certs: ok"
