#!/usr/bin/env bash
# Installs the npm packages the tests run for real (MCP reference servers, the
# OpenTelemetry JS exporters, JS instrumentations): `npm ci` in every folder
# under tests/ and bench/ that has a package-lock.json. A folder whose
# node_modules is newer than its lock file is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t locks < <(find tests bench -name package-lock.json -not -path '*/node_modules/*' | sort)
[ ${#locks[@]} -eq 0 ] && exit 0
for lock in "${locks[@]}"; do
  dir=$(dirname "$lock")
  stamp="$dir/node_modules/.package-lock.json"
  if [ -f "$stamp" ] && [ "$stamp" -nt "$lock" ]; then
    continue
  fi
  echo "toolspan: npm ci in $dir"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
done
