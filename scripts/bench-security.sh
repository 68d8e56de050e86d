#!/usr/bin/env bash
# Produce over PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL side by side, N repetitions each,
# alternating: embedded brokers alike but for security, stunnel (TLS 1.3, a private CA) in front for
# the TLS modes, SCRAM-SHA-512 for the SASL ones.
#   scripts/bench-security.sh 5 [records]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-5}
records=${2:-1000000}
kb=target/release/kbench
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/ca.key" -out "$work/ca.pem" \
  -days 1 -subj /CN=kbench-bench-ca -addext basicConstraints=critical,CA:TRUE 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/s.key" -out "$work/s.csr" -subj /CN=localhost 2>/dev/null
printf "subjectAltName=DNS:localhost,IP:127.0.0.1\n" > "$work/ext"
openssl x509 -req -in "$work/s.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 1 \
  -extfile "$work/ext" -out "$work/s.pem" 2>/dev/null
# One embedded broker per mode, alike but for security: plaintext; TLS (stunnel in front, the broker
# advertising stunnel's port); SASL (--sasl-user, SCRAM-SHA-512); SASL over TLS.
st=0
stunnel_in_front() { # accept connect
  st=$((st+1))
  printf "foreground = yes\npid =\n[k]\naccept = %s\nconnect = %s\ncert = %s\nkey = %s\n" "$1" "$2" "$work/s.pem" "$work/s.key" > "$work/st$st.conf"
  stunnel4 "$work/st$st.conf" >/dev/null 2>&1 & pids+=($!)
}
$kb broker --quiet --listen 127.0.0.1:39091 & pids+=($!)
$kb broker --quiet --listen 127.0.0.1:39092 --advertise 127.0.0.1:39093 & pids+=($!)
stunnel_in_front 127.0.0.1:39093 127.0.0.1:39092
$kb broker --quiet --listen 127.0.0.1:39094 --sasl-user bench:bench-pw & pids+=($!)
$kb broker --quiet --listen 127.0.0.1:39095 --advertise 127.0.0.1:39096 --sasl-user bench:bench-pw & pids+=($!)
stunnel_in_front 127.0.0.1:39096 127.0.0.1:39095
sleep 2
ssl=(-X security.protocol=SSL -X "ssl.ca.location=$work/ca.pem")
scram=(-X sasl.mechanism=SCRAM-SHA-512 -X sasl.username=bench -X sasl.password=bench-pw)
printf "mode\trep\trecords/s\tclient CPU us/record\n"
for r in $(seq 1 "$reps"); do
  for mode in PLAINTEXT SSL SASL_PLAINTEXT SASL_SSL; do
    case $mode in
      PLAINTEXT) args=(--bootstrap-server 127.0.0.1:39091) ;;
      SSL) args=(--bootstrap-server 127.0.0.1:39093 "${ssl[@]}") ;;
      SASL_PLAINTEXT) args=(--bootstrap-server 127.0.0.1:39094 -X security.protocol=SASL_PLAINTEXT "${scram[@]}") ;;
      SASL_SSL) args=(--bootstrap-server 127.0.0.1:39096 "${ssl[@]}" -X security.protocol=SASL_SSL "${scram[@]}") ;;
    esac
    $kb produce "${args[@]}" --topic "bench-$mode-$r" --num-records "$records" --record-size 100 --acks 1 \
      --reporting-interval 100000 --json "$work/$mode-$r.json" >/dev/null
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"$mode\t$r\t{d['records_per_sec']:.0f}\t{d['client_cpu_us_per_record']:.3f}\")" "$work/$mode-$r.json"
  done
done
