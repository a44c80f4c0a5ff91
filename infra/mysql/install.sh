#!/usr/bin/env bash
# MySQL for the tests and the benchmarks: the server and client of Debian's sid suite (9.7), unpacked
# into a folder of the project's own. Nothing is installed system-wide and the machine's apt state
# is not touched: a private apt state (its own sources list holding only sid, lists, cache and an
# empty dpkg status) downloads the packages, and dpkg-deb unpacks them. sid's C library is newer
# than Debian 12's, so infra/mysql/mysql.sh runs each binary through the unpacked root's own loader.
#
#   infra/mysql/install.sh DIR    unpack into DIR/root (once: ~55 MB downloaded, ~350 MB unpacked)
#
# $MYSQL_SERIES (default 9.7) is the series the suite is tested with: another one in sid stops
# with an error rather than giving the tests a server they were not written for.
set -euo pipefail

dest="${1:-}"
[[ -n "$dest" ]] || { sed -n '2,11p' "$0"; exit 2; }
series="${MYSQL_SERIES:-9.7}"
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)"
root="$dest/root"
[[ -f "$root/.unpacked" ]] && exit 0

# The Debian archive the machine's apt already uses (a mirror, a proxy): the first URI of its
# sources that ends in /debian (not -security, not another vendor's).
uri="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
    | grep -E '^[^#]*https?://' | grep -oE 'https?://[^ ]+' | grep -E '/debian/?$' | head -1 || true)"
uri="${uri:-http://deb.debian.org/debian}"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

state="$dest/apt"
rm -rf "$state" "$root"
mkdir -p "$state/lists/partial" "$state/archives/partial" "$state/parts" "$root"
: >"$state/status"
echo "deb [signed-by=$keyring] $uri sid main" >"$state/sources.list"
opts=(-o Dir::State="$state" -o Dir::State::Lists="$state/lists" -o Dir::State::status="$state/status"
    -o Dir::Cache="$state" -o Dir::Cache::archives="$state/archives" -o Dir::Etc::SourceList="$state/sources.list"
    -o Dir::Etc::SourceParts="$state/parts" -o Dir::Etc::Preferences="$state/none"
    -o Dir::Etc::PreferencesParts="$state/parts" -o Acquire::Languages=none -o Debug::NoLocking=1)
# As root apt downloads as its _apt user, which cannot write into this folder.
[[ "$(id -u)" -eq 0 ]] && opts+=(-o APT::Sandbox::User=root)

echo "MySQL $series: reading Debian sid's package lists from $uri"
apt-get "${opts[@]}" -qq update
version="$(apt-cache "${opts[@]}" show --no-all-versions mysql-server-core | sed -n 's/^Version: //p' | head -1)"
if [[ "$version" != "$series".* ]]; then
    echo "install.sh: Debian sid serves mysql-server-core ${version:-(none)}, not MySQL $series;" \
        "set MYSQL_SERIES to test with it" >&2
    exit 1
fi
# The server, the client and the libraries they load (sid's libc among them); not the
# maintainer scripts' tools (debconf, perl, adduser), which an unpacked root never runs.
packages="$(apt-cache "${opts[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances mysql-server-core mysql-client-core \
    | grep -E '^[a-z0-9]' | grep -E '^(mysql-(server|client)-core|lib.*|zlib1g)$' | sort -u)"
echo "MySQL $version: downloading $(wc -w <<<"$packages") packages"
(cd "$state/archives" && apt-get "${opts[@]}" -qq download $packages)
for deb in "$state"/archives/*.deb; do dpkg-deb -x "$deb" "$root"; done
echo "$version" >"$root/.unpacked"
rm -rf "$state"
echo "MySQL $version unpacked in $root ($(du -sh "$root" | cut -f1))"
