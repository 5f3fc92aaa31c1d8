#!/usr/bin/env bash
# Generates the Python gRPC code and type stubs of proto/cronlog/v1 into src/cronlog/v1.
# The output is committed and never edited by hand; tests check it is up to date.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-src}"
py=.venv/bin/python
mkdir -p "$out/cronlog/v1"
"$py" -m grpc_tools.protoc -I proto \
  --python_out="$out" --grpc_python_out="$out" \
  --plugin=protoc-gen-mypy=.venv/bin/protoc-gen-mypy --mypy_out="$out" \
  --plugin=protoc-gen-mypy_grpc=.venv/bin/protoc-gen-mypy_grpc --mypy_grpc_out="$out" \
  proto/cronlog/v1/*.proto
printf '"""Generated from proto/cronlog/v1 by scripts/gen_proto.sh. Do not edit."""\n' \
  > "$out/cronlog/v1/__init__.py"
