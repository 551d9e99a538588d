#!/bin/sh
# Writes a CA and the trial's certificates into /certs once (the first
# `docker compose up`); later runs keep them. Every kvrouter link of the
# trial is TLS, and every certificate names its holder:
#   node-dcN     kvr://dcN/member/node-dcN  raft, cluster API (mutual), client HTTPS, NATS client
#   relay-dcN    kvr://dcN/relay/relay-dcN  publication between DCs and cluster API (mutual),
#                                           gateway HTTPS, NATS client
#   engine-dcN-X (no identity URI)          NATS client: the NATS server maps it to the
#                                           engine's user, allowed only its own subjects
#   nats         nats-dc1, nats-dc2         the NATS servers
set -eu
cd /certs
[ -f ca.crt ] && exit 0
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
  -subj /CN=kvrouter-trial-ca -keyout ca.key -out ca.crt

# issue NAME SAN USAGE: NAME.crt and NAME.key for the subjectAltName SAN.
issue() {
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
    -keyout "$1.key" -out "$1.csr"
  printf 'subjectAltName=%s\nextendedKeyUsage=%s\n' "$2" "$3" > "$1.cnf"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
    -extfile "$1.cnf" -out "$1.crt"
  rm -f "$1.csr" "$1.cnf"
}
for dc in dc1 dc2; do
  issue "node-$dc" "DNS:node-$dc,URI:kvr://$dc/member/node-$dc" serverAuth,clientAuth
  issue "relay-$dc" "DNS:relay-$dc,DNS:localhost,IP:127.0.0.1,URI:kvr://$dc/relay/relay-$dc" serverAuth,clientAuth
  for e in a b; do
    issue "engine-$dc-$e" "DNS:engine-$dc-$e" clientAuth
  done
done
issue nats "DNS:nats-dc1,DNS:nats-dc2" serverAuth
rm -f ca.srl
# The services run as 65532 and read the files of this shared volume.
chmod 0644 ./*.key
