#!/usr/bin/env bash
# Replay speed: builds a 1M-event journal (the incident fixture's traffic repeated) and times
# `replay --format json`, `replay --state-at` and `replay --summary` in a release build.
# Bars from issue 5: NDJSON >= 1M events/s, --state-at <= 2 s.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release -p quotaroute --test it replay_speed -- --ignored --nocapture 2>&1 \
  | grep -E 'generated|replay --|test result'
