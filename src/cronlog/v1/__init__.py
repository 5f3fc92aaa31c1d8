"""Generated from proto/cronlog/v1 by scripts/gen_proto.sh. Do not edit."""
