#!/usr/bin/env bash
# Regenerates kjv_torah.txt: Genesis..Deuteronomy of the King James Version (public domain), as plain
# prose, from Debian's bible-kjv-text package (apt-get install bible-kjv). Verse numbers are dropped,
# each chapter becomes one paragraph headed by its name.
set -euo pipefail
bible -l100000 "gen1:1-deut34:12" |
  sed -E 's/^ +[0-9]+ //; s/^ +//' |
  awk 'NF==0 {next} /^[1-3]? ?[A-Z][a-z]+ [0-9]+$/ {if (p) print p "\n"; print; p=""; next} {p = p ? p " " $0 : $0} END {print p}' \
  > kjv_torah.txt
