#!/usr/bin/env bash
# model_names_can_fail.sh SOURCE_DIR — model_names.py is a test that can
# fail: a file outside the models that includes a model's header, calls its
# symbols and spells its name (named/lookup.c) is refused, each hit named
# with its file and line; what a comment says is not counted.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=can_fail_lib.sh
source "$here/can_fail_lib.sh"
must_refuse "named/lookup.c, which names the GPT and the MLP" python3 "$here/model_names.py" "$1" "$here/named"
must_say 'lookup.c:4: #include "ptdp/gpt.h"' 'lookup.c:8: ptdp_gpt_ops' 'lookup.c:8: ptdp_gpt' 'lookup.c:13: mlp'
must_not_say 'a comment may say' "a comment was counted"
echo "ok: a file outside the models that names one is refused, line by line"
