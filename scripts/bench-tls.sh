#!/usr/bin/env bash
# Produce over plaintext and over TLS, side by side against one embedded broker: the broker's own
# plaintext port, and stunnel (TLS 1.3, a private CA) in front of it. N repetitions each, alternating.
#   scripts/bench-tls.sh 5 [records]
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
plain=127.0.0.1:39092; tls=127.0.0.1:39093
$kb broker --quiet --listen $plain --advertise $tls & pids+=($!)
printf "foreground = yes\npid =\n[k]\naccept = %s\nconnect = %s\ncert = %s\nkey = %s\n" $tls $plain "$work/s.pem" "$work/s.key" > "$work/st.conf"
stunnel4 "$work/st.conf" >/dev/null 2>&1 & pids+=($!)
sleep 2
# The plaintext runs must reach the broker directly; it advertises the TLS port, so they use a
# second broker of their own.
plain2=127.0.0.1:39094
$kb broker --quiet --listen $plain2 & pids+=($!)
sleep 1
printf "mode\trep\trecords/s\tclient CPU us/record\n"
for r in $(seq 1 "$reps"); do
  for mode in plaintext tls; do
    if [ $mode = tls ]; then
      args=(--bootstrap-server $tls -X security.protocol=SSL -X "ssl.ca.location=$work/ca.pem")
    else
      args=(--bootstrap-server $plain2)
    fi
    $kb produce "${args[@]}" --topic "bench-$mode-$r" --num-records "$records" --record-size 100 --acks 1 \
      --reporting-interval 100000 --json "$work/$mode-$r.json" >/dev/null
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"$mode\t$r\t{d['records_per_sec']:.0f}\t{d['client_cpu_us_per_record']:.3f}\")" "$work/$mode-$r.json"
  done
done
