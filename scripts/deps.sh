# Sourced by scripts/test and scripts/stress: installs what the tests need
# when it is missing (as root; otherwise says what to install and exits),
# and puts /usr/sbin and GOPATH/bin on PATH.
export PATH="$PATH:$(go env GOPATH)/bin"

# Pinned tools the tests call.
GRPC_HEALTH_PROBE=github.com/grpc-ecosystem/grpc-health-probe@v0.4.62
STATICCHECK=honnef.co/go/tools/cmd/staticcheck@v0.8.2

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "$(basename "$0"): installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
    # The packages start a system redis on 6379 and a system MariaDB on
    # 3306 where they can; the tests start their own.
    (service redis-server stop || true) >/dev/null 2>&1
    (service mariadb stop || true) >/dev/null 2>&1
  else
    echo "$(basename "$0"): missing ${missing[*]}; install them with:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi
export PATH="$PATH:/usr/sbin"

if ! command -v grpc-health-probe >/dev/null; then
  echo "$(basename "$0"): go install $GRPC_HEALTH_PROBE"
  go install "$GRPC_HEALTH_PROBE"
fi
# The pinned staticcheck, installed again when another version is on PATH.
if ! staticcheck -version 2>/dev/null | grep -qF "(${STATICCHECK##*@v})"; then
  echo "$(basename "$0"): go install $STATICCHECK"
  go install "$STATICCHECK"
fi
