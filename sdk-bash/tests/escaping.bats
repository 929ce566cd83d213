#!/usr/bin/env bats
# The pure Bash JSON string escaper against Python's json.dumps(ensure_ascii=False), byte for byte, and
# hostile texts round-tripping through a published outcome.

bats_require_minimum_version 1.5.0

setup() {
  load test_helper
  httk_test_setup
}

# Print Python's json.dumps(ensure_ascii=False) of each NUL-terminated UTF-8 text in FILE, one a line.
python_escapes() { # <file>
  "$PYTHON" -c 'import json, sys
for text in open(sys.argv[1], "rb").read().split(b"\0")[:-1]:
    print(json.dumps(text.decode("utf-8"), ensure_ascii=False))' "$1"
}

# Print _httk_workflow_json_string of each text, one a line, from a fresh Bash (bats' own traps make
# a loop in the test shell slow) under LC_ALL=C, as the library's public functions call it.
bash_escapes() { # <text>...
  bash -c 'source "$1"
    shift
    escape_all() {
      local LC_ALL=C text escaped
      for text in "$@"; do
        _httk_workflow_json_string escaped "$text"
        printf "%s\n" "$escaped"
      done
    }
    escape_all "$@"' _ "$LIBRARY" "$@"
}

# Compare the two escapers on TEXTs.
compare_escapes() { # <text>...
  printf '%s\0' "$@" >"$BATS_TEST_TMPDIR/texts"
  python_escapes "$BATS_TEST_TMPDIR/texts" >"$BATS_TEST_TMPDIR/expected"
  bash_escapes "$@" >"$BATS_TEST_TMPDIR/actual"
  assert_same_bytes "$BATS_TEST_TMPDIR/expected" "$BATS_TEST_TMPDIR/actual"
}

# Every byte 0x01-0x7F alone and between letters (a NUL cannot be in a Bash string at all).
all_ascii() {
  local code hex char
  TEXTS=()
  for ((code = 1; code < 128; code++)); do
    printf -v hex %02x "$code"
    printf -v char '%b' "\\x$hex"
    TEXTS+=("$char" "a${char}b")
  done
}

@test "every ASCII byte 0x01-0x7F escapes exactly as Python does" {
  all_ascii
  compare_escapes "${TEXTS[@]}"
}

@test "all control characters, quotes and backslashes in one text" {
  local all='' code hex char
  for ((code = 1; code < 32; code++)); do
    printf -v hex %02x "$code"
    printf -v char '%b' "\\x$hex"
    all+=$char
  done
  # shellcheck disable=SC1003 # backslashes in single quotes are the texts under test
  compare_escapes "$all" "\"$all\\" '\\' '\\\\' '\"' '""' '\n' '\u0000' "$all$all" '' 'plain text' '/'
}

@test "non-ASCII passes through unchanged: 2, 3 and 4 byte UTF-8, U+007F, U+2028, BOM" {
  compare_escapes $'caf\xc3\xa9' $'\xe2\x82\xac' $'\xf0\x9f\x98\x80' $'\x7f' $'line\xe2\x80\xa8sep' \
    $'\xef\xbb\xbfbom' $'\xf4\x8f\xbf\xbf' $'\xc2\x80\xc2\x9f' $'mixed "\xc3\xa9"\n\t\\\xf0\x9f\x98\x80\x01'
}

@test "a published outcome has the same bytes whatever the caller's locale" {
  local text=$'caf\xc3\xa9 "q" \\ \n\t\x01 \xf0\x9f\x98\x80' locale
  for locale in C C.UTF-8 POSIX ''; do
    rm -rf "$CONTROL/outcome.ready"
    LC_ALL=$locale LANG=$locale bash -c 'source "$HTTK_WORKFLOW_BASH_API"; httk_workflow_succeed --message "$1"' \
      _ "$text"
    printf '%s' "$text" >"$BATS_TEST_TMPDIR/text"
    "$PYTHON" -c 'import json, sys
assert json.load(open(sys.argv[1]))["message"].encode() == open(sys.argv[2], "rb").read()' \
      "$OUTCOME" "$BATS_TEST_TMPDIR/text"
    [[ -e $BATS_TEST_TMPDIR/first ]] || cp "$OUTCOME" "$BATS_TEST_TMPDIR/first"
    assert_same_bytes "$BATS_TEST_TMPDIR/first" "$OUTCOME"
  done
}

@test "invalid UTF-8 is refused: lone lead, stray continuation, overlong, surrogate, beyond U+10FFFF" {
  local LC_ALL=C text out=unchanged
  for text in $'\xc3' $'a\x80' $'\xc0\xaf' $'\xe0\x80\xaf' $'\xed\xa0\x80' $'\xf4\x90\x80\x80' $'\xff' \
    $'\xf0\x9f\x98'; do
    if _httk_workflow_json_string out "$text"; then
      printf 'accepted %q\n' "$text" >&2
      return 1
    fi
    [[ $out == unchanged ]]
  done
  run --separate-stderr httk_workflow_fail code $'bad \xed\xa0\x80 surrogate'
  [[ $status -eq 2 && $stderr == *"MESSAGE is not valid UTF-8"* ]]
}

@test "hostile texts round-trip through a published outcome" {
  local hostile=$'quote " backslash \\ slash / nl \n cr \r tab \t bs \b ff \f del \x7f ' code hex char
  for ((code = 1; code < 32; code++)); do
    printf -v hex %02x "$code"
    printf -v char '%b' "\\x$hex"
    hostile+=$char
  done
  hostile+=$' \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe2\x80\xa8 \\u0000 \\"'
  local code_text=$'app.\xc3\xa9"q"\\x'
  printf '%s' "$hostile" >"$BATS_TEST_TMPDIR/message"
  printf '%s' "$code_text" >"$BATS_TEST_TMPDIR/code"
  httk_workflow_fail "$code_text" "$hostile" --details '{"k":"v"}'
  "$PYTHON" -c 'import json, sys
raw = open(sys.argv[1], "rb").read()
outcome = json.loads(raw)
failure = outcome["failure"]
assert failure["message"].encode() == open(sys.argv[2], "rb").read(), failure["message"]
assert failure["code"].encode() == open(sys.argv[3], "rb").read(), failure["code"]
again = json.dumps(outcome, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
sys.exit(raw != again)' \
    "$OUTCOME" "$BATS_TEST_TMPDIR/message" "$BATS_TEST_TMPDIR/code"
}

@test "a long text with many escapes stays exact" {
  local text='' i
  for ((i = 0; i < 500; i++)); do
    text+=$'a"\\\n\x01\xc3\xa9'
  done
  compare_escapes "$text"
}
