# shellcheck shell=bash
# httk-workflow-escapes.sh: the decoding of a JSON string that holds escapes (\" \\ \/ \b \f \n \r \t
# \uXXXX and surrogate pairs), for httk-workflow.sh's _httk_workflow_decode, which sources it on the
# first such string; a runner never sources it itself. Why a separate file: every Bash attempt parses
# what the library it sources holds (this costs 0.8 M instructions, valgrind), and the context values
# of most attempts hold no escape. Sourcing defines only functions.

# The text of the JSON string token RAW (quotes included) into VAR, its escapes decoded to UTF-8 bytes.
# Needs LC_ALL=C. Returns 0; 1 (message naming WHAT) for a bad escape, NUL or a lone surrogate.
_httk_workflow_unescape() { # <var> <raw value> <function> <what>
  local _hwu_raw=$2 _hwu_out='' _hwu_rest _hwu_c _hwu_hex _hwu_cp _hwu_low _hwu_fmt _hwu_char
  _hwu_rest=${_hwu_raw:1:${#_hwu_raw}-2}
  while [[ $_hwu_rest == *\\* ]]; do
    _hwu_out+=${_hwu_rest%%\\*}
    _hwu_rest=${_hwu_rest#*\\}
    _hwu_c=${_hwu_rest:0:1}
    _hwu_rest=${_hwu_rest:1}
    case $_hwu_c in
      '"' | \\ | /) _hwu_out+=$_hwu_c ;;
      b) _hwu_out+=$'\b' ;;
      f) _hwu_out+=$'\f' ;;
      n) _hwu_out+=$'\n' ;;
      r) _hwu_out+=$'\r' ;;
      t) _hwu_out+=$'\t' ;;
      u)
        _hwu_hex=${_hwu_rest:0:4}
        _hwu_rest=${_hwu_rest:4}
        if [[ ${#_hwu_hex} -ne 4 || $_hwu_hex == *[!0-9A-Fa-f]* ]]; then
          _httk_workflow_error "$3" "$4 has a malformed \\u escape"
          return 1
        fi
        _hwu_cp=$((16#$_hwu_hex))
        if ((_hwu_cp >= 0xD800 && _hwu_cp <= 0xDBFF)) && [[ ${_hwu_rest:0:2} == '\u' &&
          ${_hwu_rest:2:4} == [dD][c-fC-F][0-9A-Fa-f][0-9A-Fa-f] ]]; then
          _hwu_low=$((16#${_hwu_rest:2:4}))
          _hwu_rest=${_hwu_rest:6}
          _hwu_cp=$((0x10000 + ((_hwu_cp - 0xD800) << 10) + (_hwu_low - 0xDC00)))
        elif ((_hwu_cp >= 0xD800 && _hwu_cp <= 0xDFFF)); then
          _httk_workflow_error "$3" "$4 holds a lone UTF-16 surrogate"
          return 1
        elif ((_hwu_cp == 0)); then
          _httk_workflow_error "$3" "$4 holds a NUL character, which a Bash string cannot hold"
          return 1
        fi
        if ((_hwu_cp < 0x80)); then
          printf -v _hwu_fmt '\\x%02x' "$_hwu_cp"
        elif ((_hwu_cp < 0x800)); then
          printf -v _hwu_fmt '\\x%02x\\x%02x' $((0xC0 | _hwu_cp >> 6)) $((0x80 | (_hwu_cp & 0x3F)))
        elif ((_hwu_cp < 0x10000)); then
          printf -v _hwu_fmt '\\x%02x\\x%02x\\x%02x' $((0xE0 | _hwu_cp >> 12)) \
            $((0x80 | (_hwu_cp >> 6 & 0x3F))) $((0x80 | (_hwu_cp & 0x3F)))
        else
          printf -v _hwu_fmt '\\x%02x\\x%02x\\x%02x\\x%02x' $((0xF0 | _hwu_cp >> 18)) \
            $((0x80 | (_hwu_cp >> 12 & 0x3F))) $((0x80 | (_hwu_cp >> 6 & 0x3F))) $((0x80 | (_hwu_cp & 0x3F)))
        fi
        # shellcheck disable=SC2059 # the format is the escape sequence of the character's bytes
        printf -v _hwu_char "$_hwu_fmt"
        _hwu_out+=$_hwu_char
        ;;
      *)
        _httk_workflow_error "$3" "$4 has an invalid escape \\$_hwu_c"
        return 1
        ;;
    esac
  done
  printf -v "$1" '%s' "$_hwu_out$_hwu_rest"
  return 0
}
