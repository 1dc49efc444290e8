# The README's quick start helpers, for terminal 2: `. scripts/quick-start.sh` (bash or zsh), after
# setting BASE (the gateway, e.g. http://localhost:3000) and ADMIN_TOKEN. Each helper that gets no
# answer, or an error, says why in one line and fails; none waits without a bound.

J='Content-Type: application/json'

# data FIELD: prints one field (a JavaScript path) of the API answer on stdin's `data`; else the
# error's code and message, or that nothing answered at $BASE; and fails.
data() {
  node -e "let b; try { b = JSON.parse(require('fs').readFileSync(0, 'utf8')) } catch { b = {} }
    if (b.success) console.log(b.data.$1);
    else { console.error(b.error ? b.error.code + ': ' + b.error.message : 'no answer from $BASE: is terminal 1 up on that port?'); process.exit(1) }"
}

# ready PORT PID: waits up to 20 s for the receiver PID to answer on PORT (-k: this probe only checks
# that it answers); gives up at once if that process has exited.
ready() {
  for _ in $(seq 60); do
    curl -sko /dev/null "https://127.0.0.1:$1/" && return 0
    kill -0 "$2" 2>/dev/null || { echo "the receiver for port $1 stopped (its reason is above)" >&2; return 1; }
    sleep 0.3
  done
  echo "no receiver answers on port $1 after 20 s" >&2
  return 1
}

# delivered WEBHOOK TOKEN EVENT: waits up to 30 s for the webhook's delivery log to show EVENT delivered.
delivered() {
  local r
  for _ in $(seq 100); do
    r=$(curl -s "$BASE/api/v1/webhooks/$1/entregas?evento=$3&estado=exitosa" -H "Authorization: Bearer $2")
    case $r in
      *'"exitoso":true'*) echo "$3 delivered"; return 0 ;;
      *'"success":true'*) sleep 0.3 ;;
      *) echo "$r" | data entregas; return 1 ;;
    esac
  done
  echo "$3 not delivered within 30 s: see terminal 1's log" >&2
  return 1
}

# move EVENT: the courier moves $GUIA on (the operator's route); prints the shipment's new status.
move() {
  curl -s -XPOST "$BASE/internal/v1/guias/$GUIA/eventos" -H "Authorization: Bearer $ADMIN_TOKEN" \
    -H "$J" -d "{\"evento\":\"$1\"}" | data estado
}
