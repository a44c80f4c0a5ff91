#!/usr/bin/env bash
# Fetches the pinned JVM jars (infra/jars/*/pom.xml) once, with Maven, into a cache folder:
#   <cache>/spark  what every Spark job runs with (spark.jars)
#   <cache>/hdfs   the tests' MiniDFSCluster
# Maven's own repository goes to <cache>/m2, never ~/.m2. A folder is fetched again only when
# its pom changed (a stale jar would stay on the classpath beside the new one, so it starts
# empty); otherwise nothing is fetched and runs work offline.
# Usage: infra/jars/fetch.sh [cache folder, default .cache/jars]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="$(mkdir -p "${1:-.cache/jars}" && cd "${1:-.cache/jars}" && pwd)"

for part in spark hdfs; do
    pom="$here/$part/pom.xml"
    stamp="$cache/$part/.pom.sha256"
    sum="$(sha256sum "$pom" | cut -d' ' -f1)"
    [[ -f "$stamp" && "$(cat "$stamp")" == "$sum" ]] && continue
    command -v mvn >/dev/null || { echo "Maven is needed once to fetch the jars: apt-get install -y maven" >&2; exit 1; }
    echo "Fetching the $part jars into $cache/$part"
    rm -rf "${cache:?}/$part"
    log="$cache/$part.log"
    if ! mvn -B -f "$pom" -Dmaven.repo.local="$cache/m2" -Djars.dir="$cache/$part" \
        dependency:copy-dependencies >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        echo "Fetching the $part jars failed (whole log: $log); Maven Central must be reachable once" >&2
        exit 1
    fi
    echo "$sum" >"$stamp"
    echo "  $(find "$cache/$part" -name '*.jar' | wc -l) jars, $(du -sh "$cache/$part" | cut -f1)"
done
