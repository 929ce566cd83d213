#!/usr/bin/env bats
# Transactions: httk_workflow_transaction_begin and the five operations (httk-workflow-transaction.sh,
# sourced lazily), every refusal, hostile names and contents, staging at publication (layout, manifest,
# modes, durability), discarding, and the shell hygiene of the lazily sourced file. Byte parity with the
# Python SDK, and a run under the real manager, are tests/sdk/test_parity_transactions.py.

# Each @test runs in its own subshell (its assignments stay local on purpose); single-quoted scripts
# run in child shells; CALLS comes from use_call_log in test_helper.bash; the library's globals are read.
# shellcheck disable=SC2030,SC2031,SC2016,SC2153,SC2154

bats_require_minimum_version 1.5.0

setup() {
  load test_helper
  httk_test_setup
  # The fixture attempt, made transactional: data generation 7, data/ in the job directory.
  sed -e 's|"data_generation": null|"data_generation": 7|' -e "s|\"data_dir\": null|\"data_dir\": \"$JOB/data\"|" \
    "$FIXTURES/context.json" >"$BATS_TEST_TMPDIR/context.json"
  export HTTK_WORKFLOW_CONTEXT=$BATS_TEST_TMPDIR/context.json
  READY=$CONTROL/outcome.ready
  SRC=$BATS_TEST_TMPDIR/src
  mkdir -p "$SRC/sub/deeper" "$SRC/empty"
  printf 'file\n' >"$SRC/file"
  printf 'b\n' >"$SRC/sub/b.txt"
  printf 'bin\0ary\n' >"$SRC/sub/deeper/with-nul"
  chmod 751 "$SRC/sub/b.txt"
}

# Check, in Python, that the published bundle is what the engine accepts: the manifest (compact, its
# members in order) loads with the manager's own rules, every put's digest is the staged copy's, and
# expected_data_generation in outcome.json equals the manifest's (7).
assert_valid_bundle() {
  "$PYTHON" - "$READY" <<'PY'
import json, sys
from pathlib import Path
from httk.workflow.engine.publish._transaction_manifest import load_manifest
ready = Path(sys.argv[1])
raw = (ready / "transaction/manifest.json").read_bytes()
document = json.loads(raw)
assert raw == json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode() + b"\n", raw
assert list(document) == ["format", "format_version", "id", "expected_data_generation", "operations"]
order = ["id", "op", "source", "path", "sha256", "parents", "missing_ok", "require_absent", "expected_sha256"]
for op in document["operations"]:
    assert sorted(op, key=order.index) == list(op), op
load_manifest(ready / "transaction", expected_data_generation=7)
outcome = json.loads((ready / "outcome.json").read_bytes())
assert outcome["expected_data_generation"] == 7
assert list((ready / "transaction/trash").iterdir()) == []
PY
}

@test "sourcing the library does not load the transaction functions; the first call does, after any cd" {
  run --separate-stderr bash -c '
    cd "$(dirname "$1")" && source ./httk-workflow.sh && cd /
    if declare -F _httk_workflow_tx_add >/dev/null; then exit 9; fi
    httk_workflow_transaction_begin
    declare -F _httk_workflow_tx_add' _ "$LIBRARY"
  [[ $status -eq 0 && $output == _httk_workflow_tx_add ]]
}

@test "a library without the file beside it finds it beside HTTK_WORKFLOW_BASH_API, else returns 1" {
  mkdir "$BATS_TEST_TMPDIR/alone"
  cp -- "$LIBRARY" "$BATS_TEST_TMPDIR/alone/httk-workflow.sh"
  run --separate-stderr bash -c 'source "$1"; httk_workflow_transaction_begin' _ "$BATS_TEST_TMPDIR/alone/httk-workflow.sh"
  [[ $status -eq 0 && -z $stderr ]]
  HTTK_WORKFLOW_BASH_API=$BATS_TEST_TMPDIR/alone/httk-workflow.sh run --separate-stderr \
    bash -c 'source "$HTTK_WORKFLOW_BASH_API"; httk_workflow_make_dir x'
  [[ $status -eq 1 ]]
  assert_contains "$stderr" "httk_workflow_make_dir: cannot load httk-workflow-transaction.sh from $BATS_TEST_TMPDIR/alone"
}

@test "the transaction file runs no set, shopt or trap when sourced and defines no public function" {
  local file=${LIBRARY%/*}/httk-workflow-transaction.sh
  run grep -nE '^[[:space:]]*(set|shopt|trap|export|cd|umask)([[:space:]]|$)|^(IFS|LC_ALL|LANG)=' "$file"
  [[ $status -eq 1 ]]
  run grep -nE '^httk_workflow_' "$file"
  [[ $status -eq 1 ]]
}

@test "the transaction path leaves the caller's shell exactly as it was" {
  run --separate-stderr bash "$FIXTURES/hygiene.sh" "$LIBRARY" "$SRC"
  if [[ $status -ne 0 ]]; then
    printf '%s\n' "$stderr" >&2
    return 1
  fi
  [[ -f $READY/transaction/payload/made\ dir/\*.txt ]]
}

@test "begin: refused for a job without transactional data; operations before begin are refused" {
  HTTK_WORKFLOW_CONTEXT=$FIXTURES/context.json run --separate-stderr bash -c \
    'source "$HTTK_WORKFLOW_BASH_API"; httk_workflow_transaction_begin'
  [[ $status -eq 2 ]]
  assert_contains "$stderr" "httk_workflow_transaction_begin: this job is not transactional: only a job with \
data.mode 'transactional' in a workspace with the transactional-data-v1 extension can contribute to data/"
  run --separate-stderr httk_workflow_make_dir results
  [[ $status -eq 2 ]]
  assert_contains "$stderr" "no transaction is open: call httk_workflow_transaction_begin first"
  run --separate-stderr httk_workflow_transaction_begin extra
  [[ $status -eq 2 ]]
}

@test "each operation: its id (op<n> unless given, through --var), its manifest entry, and the outcome member" {
  local id ids
  cd "$BATS_TEST_TMPDIR"
  httk_workflow_transaction_begin
  httk_workflow_make_dir results/relax --parents --var id
  [[ $id == op1 ]]
  httk_workflow_put_file results/relax/energy.json --content '{"e":-1}' --op-id energy --var id
  [[ $id == energy ]]
  httk_workflow_put_file results/relax/file src/file --require-absent
  httk_workflow_transaction_begin # a second begin keeps the open transaction
  httk_workflow_put_tree tree src/ --op-id=tree
  httk_workflow_replace_tree current "$SRC" --expected-sha256 "$(printf '%064d' 1)"
  httk_workflow_remove scratch --missing-ok --expected-sha256="$(printf '%064d' 2)" --var id
  [[ $id == op6 ]]
  httk_workflow_transaction_operation_ids ids
  [[ $ids == 'op1 energy op3 tree op5 op6' ]]
  [[ -z $(leftover_drafts) && ! -e $READY ]] # nothing is written before the outcome
  httk_workflow_succeed --message staged
  assert_valid_bundle
  "$PYTHON" - "$READY" "$SRC" <<'PY'
import hashlib, json, sys
from pathlib import Path
from httk.workflow.protocol._digest import tree_digest
ready, src = Path(sys.argv[1]), Path(sys.argv[2])
raw = (ready / "outcome.json").read_bytes()
assert raw.endswith(b',"action":"succeed","expected_data_generation":7,"message":"staged"}\n'), raw
manifest = json.loads((ready / "transaction/manifest.json").read_bytes())
digest = tree_digest(src)
assert manifest["operations"] == [
    {"id": "op1", "op": "make-dir", "path": "results/relax", "parents": True},
    {"id": "energy", "op": "put-file", "source": "payload/results/relax/energy.json",
     "path": "results/relax/energy.json", "sha256": hashlib.sha256(b'{"e":-1}').hexdigest()},
    {"id": "op3", "op": "put-file", "source": "payload/results/relax/file", "path": "results/relax/file",
     "sha256": hashlib.sha256(b"file\n").hexdigest(), "require_absent": True},
    {"id": "tree", "op": "put-tree", "source": "payload/tree", "path": "tree", "sha256": digest},
    {"id": "op5", "op": "replace-tree", "source": "payload/current", "path": "current", "sha256": digest,
     "expected_sha256": "0" * 63 + "1"},
    {"id": "op6", "op": "remove", "path": "scratch", "missing_ok": True, "expected_sha256": "0" * 63 + "2"},
], manifest["operations"]
listing = sorted(str(p.relative_to(ready / "transaction")) for p in (ready / "transaction").rglob("*"))
assert listing == ["manifest.json", "payload", "payload/current", "payload/current/empty",
    "payload/current/file", "payload/current/sub", "payload/current/sub/b.txt",
    "payload/current/sub/deeper", "payload/current/sub/deeper/with-nul", "payload/results",
    "payload/results/relax", "payload/results/relax/energy.json", "payload/results/relax/file",
    "payload/tree", "payload/tree/empty", "payload/tree/file", "payload/tree/sub", "payload/tree/sub/b.txt",
    "payload/tree/sub/deeper", "payload/tree/sub/deeper/with-nul", "trash"], listing
assert (ready / "transaction/payload/tree/sub/deeper/with-nul").read_bytes() == b"bin\0ary\n"
PY
  [[ -z $(leftover_drafts) ]]
}

@test "every refusal returns 2, names the argument in Python's words, and changes nothing" {
  local call want ids status
  local -a cases=(
    "httk_workflow_make_dir /etc/passwd|operation 'op3': argument path must be relative, not absolute ('/etc/passwd')"
    "httk_workflow_make_dir a//b|argument path must be normalized: no empty, '.' or '..' components ('a//b')"
    "httk_workflow_make_dir a/./b|must be normalized"
    "httk_workflow_remove ../x|must be normalized"
    "httk_workflow_remove 'x/'|must be normalized"
    "httk_workflow_make_dir ''|argument path must be a nonempty string, not ''"
    "httk_workflow_make_dir .httk-job/x|argument path must not name protocol control data ('.httk-job')"
    "httk_workflow_make_dir x/.httk-workflow|must not name protocol control data ('.httk-workflow')"
    "httk_workflow_make_dir .httk-attempt.a|must not name protocol control data ('.httk-attempt.a')"
    "httk_workflow_make_dir \$'\\xff'|argument path must be valid UTF-8 (\$'\\377')"
    "httk_workflow_make_dir \"\$(printf 'x%.0s' {1..256})\"|argument path has a component longer than 255 bytes"
    "httk_workflow_make_dir x --op-id bad/id|argument op_id must match [A-Za-z0-9_][A-Za-z0-9._-]{0,63}, not 'bad/id'"
    "httk_workflow_make_dir x --op-id .x|argument op_id must match"
    "httk_workflow_make_dir x --op-id taken|operation 'taken': argument op_id is already used by another operation"
    "httk_workflow_remove x --expected-sha256 ABC|argument expected_sha256 must be 64 lowercase hexadecimal digits, not 'ABC'"
    "httk_workflow_put_file x --content 1 --require-absent --expected-sha256 \$(printf '%064d' 0)|argument require_absent cannot be combined with expected_sha256"
    "httk_workflow_remove held|argument path is also the path of operation 'taken'"
    "httk_workflow_make_dir held/x|argument path lies below 'held' of operation 'taken'"
    "httk_workflow_make_dir late|argument path holds 'late/x' of the earlier operation 'op2'; add make_dir before the operations below it"
    "httk_workflow_remove late|argument path holds 'late/x' of operation 'op2'"
    "httk_workflow_put_file x missing|argument source cannot be used as a source: no such file or directory ('missing')"
    "httk_workflow_put_file x src|src: argument source must be a regular file"
    "httk_workflow_put_tree x src/file|src/file: argument source_dir must be a directory"
    "httk_workflow_replace_tree x missing|argument source_dir cannot be used as a source"
    "httk_workflow_put_tree x|SOURCE_DIR is missing"
    "httk_workflow_put_file x src/file --content y|give exactly one of SOURCE and --content TEXT"
    "httk_workflow_put_file x|give exactly one of SOURCE and --content TEXT"
    "httk_workflow_put_file|usage: httk_workflow_put_file PATH SOURCE|--content TEXT"
    "httk_workflow_make_dir x --bogus|unexpected argument '--bogus' (options: --parents --op-id --var)"
    "httk_workflow_make_dir x extra|unexpected argument 'extra'"
    "httk_workflow_remove x --parents|unexpected argument '--parents'"
    "httk_workflow_make_dir x --parents --parents|--parents is given twice"
    "httk_workflow_make_dir x --parents=yes|--parents takes no value"
    "httk_workflow_make_dir x --op-id|--op-id needs a value"
    "httk_workflow_make_dir x --var _hw_x|VAR '_hw_x' must be a shell variable name"
    "httk_workflow_transaction_operation_ids|usage: httk_workflow_transaction_operation_ids VAR"
  )
  cd "$BATS_TEST_TMPDIR"
  httk_workflow_transaction_begin
  httk_workflow_put_file held --content '' --op-id taken
  httk_workflow_put_file late/x --content ''
  for call in "${cases[@]}"; do
    want=${call#*|}
    status=0
    eval "${call%%|*}" 2>"$BATS_TEST_TMPDIR/stderr" || status=$?
    if [[ $status -ne 2 ]]; then
      printf 'returned %s: %s\n' "$status" "${call%%|*}" >&2
      return 1
    fi
    assert_contains "$(<"$BATS_TEST_TMPDIR/stderr")" "$want"
    httk_workflow_transaction_operation_ids ids
    [[ $ids == 'taken op2' ]]
  done
}

@test "hostile names and contents round-trip into the manifest and the staged payload" {
  local name=$'q"uo\\te \xc3\xa9 \n\t\x01\x1f\x7f \xf0\x9f\xa7\xaa %s * [a] -x'
  mkdir -p "$SRC/$name/$name"
  printf '%s' "$name" >"$SRC/$name/$name/$name"
  printf '%s' "$name" >"$SRC/$name.src"
  httk_workflow_transaction_begin
  httk_workflow_make_dir "$name"
  httk_workflow_put_file "$name/text $name" --content "$name"$'\n'
  httk_workflow_put_file "$name/copy" "$SRC/$name.src"
  httk_workflow_put_tree "$name/tree" "$SRC"
  httk_workflow_remove "$name/old" --missing-ok
  httk_workflow_advance next --message "$name"
  assert_valid_bundle
  "$PYTHON" - "$READY" "$SRC" "$name" <<'PY'
import json, os, sys
from pathlib import Path
from httk.workflow.protocol._digest import tree_digest
ready, src = Path(sys.argv[1]), Path(sys.argv[2])
name = os.fsencode(sys.argv[3]).decode("utf-8")
manifest = json.loads((ready / "transaction/manifest.json").read_bytes())
assert [op["path"] for op in manifest["operations"]] == [
    name, f"{name}/text {name}", f"{name}/copy", f"{name}/tree", f"{name}/old"]
payload = ready / "transaction/payload"
assert (payload / name / f"text {name}").read_bytes() == (name + "\n").encode()
assert (payload / name / "copy").read_bytes() == name.encode()
assert (payload / name / "tree" / name / name / name).read_bytes() == name.encode()
assert manifest["operations"][3]["sha256"] == tree_digest(payload / name / "tree") == tree_digest(src)
assert json.loads((ready / "outcome.json").read_bytes())["message"] == name
PY
}

@test "a symlink or FIFO in a source tree, or a vanished source, is refused at publication: nothing is left" {
  local make
  for make in 'ln -s /etc "$1/sub/link"' 'mkfifo "$1/sub/fifo"' 'rm "$1/file"'; do
    run --separate-stderr bash -c "source \"\$HTTK_WORKFLOW_BASH_API\"
      httk_workflow_transaction_begin
      httk_workflow_put_file file \"\$1/file\" --op-id f
      httk_workflow_put_tree tree \"\$1\" --op-id t
      $make
      httk_workflow_succeed" _ "$SRC"
    [[ $status -eq 2 ]]
    case $make in
      ln*) assert_contains "$stderr" "$SRC/sub/link: operation 't': source tree holds a symbolic link; a transaction carries only files and directories" ;;
      mkfifo*) assert_contains "$stderr" "$SRC/sub/fifo: operation 't': source tree holds a device, socket or FIFO" ;;
      rm*) assert_contains "$stderr" "$SRC/file: operation 'f': source is no longer a regular file" ;;
    esac
    [[ ! -e $READY && -z $(leftover_drafts) ]]
    rm -f "$SRC/sub/link" "$SRC/sub/fifo"
    printf 'file\n' >"$SRC/file"
  done
}

@test "fail, retry and pause discard the transaction; an empty one publishes no bundle and no member" {
  local call ids
  for call in 'httk_workflow_fail x.broken broke' 'httk_workflow_retry again' 'httk_workflow_pause look' \
    'httk_workflow_succeed'; do
    httk_workflow_transaction_begin
    [[ $call == httk_workflow_succeed ]] || httk_workflow_put_file x --content x
    eval "$call"
    [[ -e $READY && ! -e $READY/transaction && $(<"$OUTCOME") != *expected_data_generation* ]]
    [[ -z $(leftover_drafts) ]]
    if [[ $call != httk_workflow_succeed ]]; then
      httk_workflow_transaction_operation_ids ids
      [[ -z $ids && -z $_httk_workflow_tx_open ]]
    fi
    rm -r "$READY"
    _httk_workflow_published=''
  done
}

@test "a second outcome stages nothing and returns 3" {
  httk_workflow_transaction_begin
  httk_workflow_put_tree tree "$SRC"
  httk_workflow_succeed
  run --separate-stderr httk_workflow_advance again
  [[ $status -eq 3 && -z $(leftover_drafts) ]]
  run --separate-stderr httk_workflow_wait again
  [[ $status -eq 2 ]] # no child: refused before anything else
}

@test "after the outcome, begin and every operation return 3 in Python's words and change nothing" {
  local call ids status publish function operation want
  local -a calls=(
    httk_workflow_transaction_begin 'httk_workflow_make_dir late' 'httk_workflow_make_dir /etc'
    'httk_workflow_put_file late --content x' 'httk_workflow_put_file late missing'
    "httk_workflow_put_tree late $SRC" "httk_workflow_replace_tree late $SRC" 'httk_workflow_remove x'
  )
  for publish in httk_workflow_succeed 'httk_workflow_fail x.broken broke' another-process; do
    httk_workflow_transaction_begin
    httk_workflow_put_file x --content x
    if [[ $publish == another-process ]]; then
      mkdir "$READY" # an outcome published by another process (a helper the step ran) counts too
    else
      $publish
    fi
    want=op1
    [[ $publish != httk_workflow_fail* ]] || want='' # fail discarded the transaction
    for call in "${calls[@]}"; do
      function=${call%% *}
      operation=${function#httk_workflow_}
      operation=${operation/%_begin/}
      status=0
      $call 2>"$BATS_TEST_TMPDIR/stderr" || status=$?
      [[ $status -eq 3 ]]
      [[ $(<"$BATS_TEST_TMPDIR/stderr") == "$function: $READY: $operation refused: the attempt has already \
published its one outcome; a transaction goes out with the outcome, so open it and add its operations before \
publishing" ]]
      httk_workflow_transaction_operation_ids ids
      [[ $ids == "$want" ]]
    done
    [[ -z $(leftover_drafts) && ! -e $READY/transaction/payload/late ]]
    rm -r "$READY"
    _httk_workflow_published=''
    _httk_workflow_tx_discard
  done
}

@test "modes: copies keep their permission bits less set-id and sticky; text is 0644 less the umask" {
  local mask
  chmod 4755 "$SRC/file"
  chmod 1751 "$SRC/sub/b.txt"
  for mask in 022 002 077; do
    run --separate-stderr bash -c 'umask "$2"; source "$HTTK_WORKFLOW_BASH_API"
      httk_workflow_transaction_begin
      httk_workflow_put_file text --content hi
      httk_workflow_put_file file "$1/file"
      httk_workflow_put_tree tree "$1"
      httk_workflow_succeed' _ "$SRC" "$mask"
    [[ $status -eq 0 ]]
    [[ $(stat -c %a "$READY/transaction/payload/text" "$READY/transaction/manifest.json") == \
      "$(printf '%o\n%o' $((8#644 & ~8#$mask)) $((8#644 & ~8#$mask)))" ]]
    [[ $(stat -c %a "$READY/transaction/payload/file" "$READY/transaction/payload/tree/sub/b.txt") == $'755\n751' ]]
    [[ $(stat -c %a "$READY/transaction/payload/tree/sub") == "$(printf '%o' $((8#777 & ~8#$mask)))" ]]
    rm -r "$READY"
  done
}

@test "durable: every file and directory of the bundle is synchronized before the rename" {
  local line draft='' synced=$BATS_TEST_TMPDIR/synced expected=$BATS_TEST_TMPDIR/expected
  local -a words
  use_call_log
  httk_workflow_transaction_begin
  httk_workflow_make_dir d
  httk_workflow_put_file d/f --content f
  httk_workflow_put_tree t "$SRC"
  HTTK_WORKFLOW_DURABLE=1 httk_workflow_succeed
  : >"$synced"
  while IFS= read -r line; do
    if [[ $line == 'mv '* ]]; then
      draft=${line#mv -T -- }
      draft=${draft%% *}
      break
    fi
    if [[ $line == 'sync -- '* ]]; then # the names in this test hold no space
      read -r -a words <<<"${line#sync -- }"
      printf '%s\n' "${words[@]}" >>"$synced"
    fi
  done <"$CALLS"
  [[ -n $draft ]]
  (cd "$READY" && find . | sed "s|^\.|$draft|") | sort >"$expected"
  sort -o "$synced" "$synced"
  assert_same_bytes "$expected" "$synced"
}

@test "large: 1001 put_files and a tree of 1500 files are digested and synchronized in batches" {
  # In a child shell: bats' own traps make loops in the test shell slow.
  run --separate-stderr bash -c 'source "$HTTK_WORKFLOW_BASH_API"
    mkdir "$1/many"
    for ((i = 0; i < 1500; i++)); do printf "%s" "$i" >"$1/many/f$i"; done
    httk_workflow_transaction_begin
    httk_workflow_make_dir files
    for ((i = 0; i < 1001; i++)); do httk_workflow_put_file "files/$i" --content "$i"; done
    httk_workflow_put_tree tree "$1"
    HTTK_WORKFLOW_DURABLE=1 httk_workflow_succeed' _ "$SRC"
  [[ $status -eq 0 ]]
  assert_valid_bundle
}
