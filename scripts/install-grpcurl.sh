#!/usr/bin/env bash
# Builds grpcurl (for trying the api by hand) into the folder given, from the Go module
# proxy, pinned. grpcurl 1.9 needs Go 1.21; Debian 12's Go is 1.19, which builds 1.8.9, the
# last release for it, so a fresh Debian gets a working grpcurl without a Go of its own.
set -euo pipefail
bin_dir=$(realpath -m "${1:?usage: install-grpcurl.sh BIN_DIR}")
go=$(command -v go || echo /usr/local/go/bin/go)
[ -x "$go" ] || { echo "no Go toolchain; run scripts/install-system-deps.sh" >&2; exit 1; }
minor=$("$go" env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
[[ $minor =~ ^[0-9]+$ ]] || minor=99  # a development build of Go: new enough
if [ "$minor" -ge 21 ]; then version=v1.9.3; else version=v1.8.9; fi
GOBIN="$bin_dir" "$go" install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$version"
