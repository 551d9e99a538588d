#!/bin/sh
# Writes a CA and the trial's certificates into /certs once (the first
# `docker compose up`); later runs keep them. Every kvrouter link of the
# trial is TLS: the client APIs, raft and the cluster APIs (mutual), the
# relays' publication between DCs (mutual) and NATS.
set -eu
cd /certs
[ -f ca.crt ] && exit 0
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
  -subj /CN=kvrouter-trial-ca -keyout ca.key -out ca.crt
names="node-dc1 node-dc2 relay-dc1 relay-dc2 nats-dc1 nats-dc2 localhost"
san=$(for n in $names; do printf 'DNS:%s,' "$n"; done)IP:127.0.0.1
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=kvrouter-trial \
  -keyout tls.key -out tls.csr
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" > ext.cnf
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -extfile ext.cnf -out tls.crt
rm -f tls.csr ext.cnf ca.srl
chmod 0644 tls.key
