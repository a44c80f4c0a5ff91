#!/usr/bin/env bash
# Installs the Debian packages the loader runs with, when any is missing:
#   mariadb-server, mariadb-client  the private MariaDB of the demo and the tests
#   maven                           fetches the pinned JVM jars once (infra/jars/fetch.sh)
#   openssl                         makes the private MariaDB's TLS certificate (infra/mariadb/mariadb.sh)
#   chromium, nodejs, npm           the UI test's headless browser and its driver (playwright-core)
#   cargo, rustc                    build the native module (native/, PyO3 needs Rust 1.74 or newer):
#                                   on Debian 12 the -web packages (1.85 and later), whose plain ones
#                                   are too old; a cargo already on PATH (rustup's) is used as it is
# As root it installs them with apt-get; otherwise it prints the exact command and fails.
# Quiet and fast when everything is there already.
set -euo pipefail

missing=()
have() { command -v "$1" >/dev/null 2>&1 || [[ -x "/usr/sbin/$1" ]]; }
have mariadbd || missing+=(mariadb-server)
have mariadb || missing+=(mariadb-client)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ! command -v cargo >/dev/null 2>&1; then
    if [[ "$(cut -d. -f1 /etc/debian_version 2>/dev/null)" == 12 ]]; then
        missing+=(cargo-web rustc-web)
    else
        missing+=(cargo rustc)
    fi
fi

[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ "$(id -u)" -ne 0 ]]; then
    echo "Missing Debian packages: ${missing[*]}" >&2
    echo "Install them with:  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
echo "Installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# The package's own service is not wanted (the loader starts a private server); where
# policy-rc.d allows it, Debian starts it anyway, which is harmless.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
