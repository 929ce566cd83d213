# shellcheck shell=bash disable=SC2016 # awk programs reach awk through _vt_rewrite, unexpanded on purpose
# vasptools.sh: httk v1's VASP helpers, reimplemented for the httk-workflow v1 runner.
#
#   #!/bin/bash
#   . "$HTTK_DIR"/Execution/tasks/ht_tasks_api.sh
#   . "$HTTK_DIR"/Execution/tasks/vasp/vasptools.sh
#   HT_TASK_INIT "$@"
#   ...
#   VASP_PRECLEAN; cp ../INCAR.relax INCAR; VASP_PREPARE_CALC
#   if VASP_RUN_CONTROLLED "$TIMEOUT" $VASP_EXECUTE; then ...; else
#     HT_TASK_ATOMIC_SECTION_START
#     VASP_INPUTS_FIX_ERROR && HT_TASK_ATOMIC_SECTION_END_NEXT relax || HT_TASK_ATOMIC_SECTION_END_BROKEN
#   fi
#
# Every helper of v1's vasptools.sh that templates call is here under its name, with its arguments,
# files and return codes (reference §2.9). The file work (INCAR tags, KPOINTS, POSCAR edits, OUTCAR
# and OSZICAR extracts) is done here with awk, as v1 did. What needs to know VASP -- the POTCAR
# datasets, running and watching VASP, which error a run shows and what to change for it -- is the
# VASP package's (httk-workflow-vasp), called through `python -m httk.workflow.v1.vasptools` with the
# manager's interpreter: VASP_PREPARE_POTCAR, VASP_RUN_CONTROLLED, VASP_INPUTS_FIX_ERROR and
# VASP_INPUTS_ADJUST. So an old template and the packaged vasp-relax find the same problems and climb
# the same ladders of remedies; those four return their failure code, with a message naming the
# package, when it is not installed.
#
# Kept from v1 where a template could depend on it, and written down:
#   - ht.controlled.msgs holds v1's tokens (ZPOTRF, LAST BADCONV ELEC ..., FINISHED, TIMEOUT) and, for
#     problems v1 did not know, the catalog's name in upper case;
#   - remedies live in ht.remedy.<problem> files (line 1 the rung, then what VASP_PREPARE_INCAR and
#     VASP_PREPARE_KPOINTS apply each time a step rebuilds its inputs); v1's keywords (NOSYM,
#     GAUSSMEAR, SOFTMIX, GAMMA_KPTS, ...) in files of imported tasks still apply;
#   - VASP_PREPARE_INCAR sets MAGMOM from VASP_MAGMOMLINE even when the INCAR has one (v1 tested a tag
#     spelled MAGMOMS), and turns ICHARG=1 into 2 unless CHGCAR exists and is empty (v1's test);
#   - v1's three checkers are the catalog's watch inside VASP_RUN_CONTROLLED; they are not offered on
#     their own for HT_TASK_RUN_CONTROLLED.
# Sourcing defines VASP_* and _vt_* functions only; nothing changes a shell option.

# Run `python -m httk.workflow.v1.vasptools ARG...` with the manager's interpreter.
_vt_python() { # <argument>...
  "${HTTK_WORKFLOW_PYTHON:-python3}" -P -m httk.workflow.v1.vasptools "$@"
}

# Print the remedy lines (line 2 on, trimmed) of every ht.remedy.* file in the current directory, in C
# order.
_vt_remedy_lines() {
  local -a files=()
  local file LC_COLLATE=C
  for file in ht.remedy.*; do
    [[ -f $file ]] && files+=("$file")
  done
  ((${#files[@]} == 0)) || command awk 'FNR > 1 && NF { sub(/^[ \t]+/, ""); sub(/[ \t]+$/, ""); print }' "${files[@]}"
}

# Return 0 when some remedy line of the current directory is KEYWORD.
_vt_has_remedy() { # <keyword>
  _vt_remedy_lines | command grep -qxF -- "$1"
}

# Replace FILE by what the awk PROGRAM prints from it (with awk's own -v assignments before it).
_vt_rewrite() { # <file> <awk argument>...
  local file=$1
  shift
  command awk "$@" "$file" >"$file.httk-v1.tmp" && command mv -f -- "$file.httk-v1.tmp" "$file"
}

# ---- INCAR tags ------------------------------------------------------------------------------------

# The awk function that splits an INCAR line into its statements (before a # or ! comment) and the
# statement's tag, shared by the tag helpers.
_VT_INCAR_AWK='function tag_of(statement,   t) { t = statement; sub(/=.*/, "", t); gsub(/[ \t]/, "", t); return toupper(t) }
function value_of(statement,   v) { v = statement; sub(/^[^=]*=[ \t]*/, "", v); sub(/[ \t]+$/, "", v); return v }
function body_of(line,   b) { b = line; sub(/[#!].*/, "", b); return b }
function comment_of(line) { return match(line, /[#!].*/) ? substr(line, RSTART) : "" }'

# Print the value of TAG in FILE (default INCAR): its last statement. Returns 1 when TAG is not set.
VASP_GET_TAG() { # <tag> [file]
  command awk -v tag="${1^^}" "$_VT_INCAR_AWK"'
    { n = split(body_of($0), parts, ";"); for (i = 1; i <= n; i++) if (tag_of(parts[i]) == tag && parts[i] ~ /=/) { value = value_of(parts[i]); found = 1 } }
    END { if (found) print value; exit !found }' "${2:-INCAR}" 2>/dev/null || return 1
}

# Remove every statement setting TAG from FILE (default INCAR), keeping the other statements and comments.
_vt_unset_tag() { # <tag> [file]
  local file=${2:-INCAR}
  [[ -f $file ]] || return 0
  _vt_rewrite "$file" -v tag="${1^^}" "$_VT_INCAR_AWK"'
    { n = split(body_of($0), parts, ";"); kept = ""; dropped = 0
      for (i = 1; i <= n; i++) { if (tag_of(parts[i]) == tag && parts[i] ~ /=/) dropped = 1; else if (parts[i] ~ /[^ \t]/) kept = kept (kept == "" ? "" : ";") parts[i] }
      if (!dropped) print; else if (kept != "" || comment_of($0) != "") print kept comment_of($0) }'
}

# Set TAG = VALUE in FILE (default INCAR, created when missing): earlier statements of TAG are removed
# and the new one appended.
VASP_SET_TAG() { # <tag> <value> [file]
  local file=${3:-INCAR}
  _vt_unset_tag "$1" "$file"
  printf '%s = %s\n' "${1^^}" "$2" >>"$file"
}

# Set TAG = VALUE only when FILE (default INCAR) does not set TAG.
_vt_default_tag() { # <tag> <value> [file]
  VASP_GET_TAG "$1" "${3:-INCAR}" >/dev/null || VASP_SET_TAG "$@"
}

# ---- POSCAR, POTCAR and KPOINTS --------------------------------------------------------------------

# Print MAGMOM for the POSCAR (default ./POSCAR): the [MAGMOM=...] tag of its first line when there is
# one, else 5 for every atom (<count>*5 per species).
VASP_MAGMOMLINE() { # [poscar]
  command awk 'NR == 1 && match($0, /\[MAGMOM=[^]]*\]/) { print substr($0, RSTART + 8, RLENGTH - 9); exit }
    NR == 7 { for (i = 1; i <= NF; i++) printf "%s%d*5", (i > 1 ? " " : ""), $i; print ""; exit }' "${1:-POSCAR}"
}

# Print an NBANDS for POSCAR, POTCAR and INCAR in the current directory: the largest of NELECT/2 +
# NIONS/2, 0.6 NELECT and, with ISPIN = 2, (NELECT + |total MAGMOM|)/2 + NIONS/2; one more band per
# BUMP_BANDS remedy; rounded up to an even number, then to a multiple of NPAR. Returns 1 without a
# POTCAR whose ZVALs match the POSCAR's species.
VASP_NBANDSLINE() {
  local ispin npar magmom
  [[ -f POTCAR && -f POSCAR ]] || return 1
  ispin=$(VASP_GET_TAG ISPIN) || ispin=1
  npar=$(VASP_GET_TAG NPAR) || npar=1
  magmom=$(VASP_GET_TAG MAGMOM) || magmom=$(VASP_MAGMOMLINE)
  command awk -v ispin="$ispin" -v npar="$npar" -v magmom="$magmom" -v bumps="$(_vt_remedy_lines | command grep -cxF BUMP_BANDS)" '
    FILENAME == "POTCAR" && match($0, /ZVAL *= *[0-9.]+/) { s = substr($0, RSTART, RLENGTH); sub(/.*= */, "", s); zval[++nz] = s + 0 }
    FILENAME == "POSCAR" && FNR == 7 { for (i = 1; i <= NF; i++) count[i] = $i; ns = NF }
    END {
      if (nz != ns || ns == 0) exit 1
      for (i = 1; i <= ns; i++) { nelect += zval[i] * count[i]; nions += count[i] }
      n = split(magmom, m, " "); total = 0
      for (i = 1; i <= n; i++) { if (split(m[i], p, "*") == 2) total += p[1] * p[2]; else total += m[i] }
      best = nelect / 2 + nions / 2
      if (0.6 * nelect > best) best = 0.6 * nelect
      if (ispin + 0 == 2 && (nelect + (total < 0 ? -total : total)) / 2 + nions / 2 > best) best = (nelect + (total < 0 ? -total : total)) / 2 + nions / 2
      bands = int(best); if (bands < best) bands++
      bands += bumps; if (bands % 2) bands++
      if (npar + 0 > 1 && bands % npar) bands += npar - bands % npar
      print bands }' POTCAR POSCAR
}

# Print the k-point subdivisions "N1 N2 N3" for POSCAR (default ./POSCAR) at length density L: each
# the ceiling of L |b_i| + 0.5 (b_i the reciprocal vectors, without 2 pi), at least 3; then the
# remedies BUMP_KPTS (one more each, per remedy line) and EQUAL_KPTS (all the largest).
VASP_KPOINTSLINE() { # <l> [poscar]
  command awk -v l="$1" -v bumps="$(_vt_remedy_lines | command grep -cxF BUMP_KPTS)" \
    -v equal="$(_vt_remedy_lines | command grep -cxF EQUAL_KPTS)" '
    FNR == 2 { scale = $1 }
    FNR >= 3 && FNR <= 5 { for (j = 1; j <= 3; j++) a[FNR - 2, j] = $j }
    END {
      volume = a[1,1] * (a[2,2] * a[3,3] - a[2,3] * a[3,2]) - a[1,2] * (a[2,1] * a[3,3] - a[2,3] * a[3,1]) + a[1,3] * (a[2,1] * a[3,2] - a[2,2] * a[3,1])
      if (volume < 0) volume = -volume
      if (scale < 0) scale = exp(log(-scale / volume) / 3)
      top = 0
      for (i = 1; i <= 3; i++) {
        j = i % 3 + 1; k = j % 3 + 1
        cx = a[j,2] * a[k,3] - a[j,3] * a[k,2]; cy = a[j,3] * a[k,1] - a[j,1] * a[k,3]; cz = a[j,1] * a[k,2] - a[j,2] * a[k,1]
        length_ = sqrt(cx * cx + cy * cy + cz * cz) / (volume * scale)
        x = l * length_ + 0.5; n[i] = int(x); if (n[i] < x) n[i]++
        if (n[i] < 3) n[i] = 3
        n[i] += bumps; if (n[i] > top) top = n[i]
      }
      if (equal) for (i = 1; i <= 3; i++) n[i] = top
      print n[1], n[2], n[3] }' "${2:-POSCAR}"
}

# Write KPOINTS, an automatic mesh at length density L (default 20) for ./POSCAR: Gamma-centred with
# the remedy GAMMA_KPTS, Monkhorst-Pack otherwise (or with MONKHORST_KPTS, when it comes later).
VASP_PREPARE_KPOINTS() { # [l]
  local mesh style=Monkhorst-pack keyword
  mesh=$(VASP_KPOINTSLINE "${1:-20}") || return 1
  while IFS= read -r keyword; do
    case $keyword in
      GAMMA_KPTS) style=Gamma ;;
      MONKHORST_KPTS) style=Monkhorst-pack ;;
    esac
  done < <(_vt_remedy_lines)
  printf 'Automatic mesh (length density %s)\n0\n%s\n%s\n0 0 0\n' "${1:-20}" "$style" "$mesh" >KPOINTS
}

# Concatenate the POTCAR datasets of ./POSCAR's species from $VASP_PSEUDOLIB into ./POTCAR, each the
# first of <element>_3, _2, _d, _pv, _sv, <element>, _h, _s there (Ru, K and Rb: _sv before _pv).
VASP_PREPARE_POTCAR() {
  if [[ -z ${VASP_PSEUDOLIB-} ]]; then
    printf 'VASP_PREPARE_POTCAR: VASP_PSEUDOLIB names no POTCAR library\n' >&2
    return 1
  fi
  _vt_python potcar "$VASP_PSEUDOLIB"
}

# Write POTCAR.summary from POTCAR (default ./POTCAR): each dataset's PSCTR parameter block.
VASP_POTCAR_SUMMARY() { # [potcar]
  command awk '/parameters from PSCTR are:/ { inside = 1 }
    inside && /End of Dataset/ { inside = 0; print ""; next }
    inside { print }
    inside && /END of PSCTR-controll parameters/ { inside = 0; print "" }' "${1:-POTCAR}" >POTCAR.summary
}

# Multiply the scale line of a POSCAR by FACTOR (lengths, so the volume by FACTOR^3, as v1 did). The
# POSCAR (default ./POSCAR) may come before or after the factor.
VASP_POSCAR_SCALE_VOLUME() { # [poscar] <factor> | <factor> [poscar]
  local file=POSCAR factor=$1
  if [[ -f $1 ]]; then
    file=$1 factor=$2
  elif [[ -n ${2-} ]]; then
    file=$2
  fi
  _vt_rewrite "$file" -v factor="$factor" 'NR == 2 { printf "%.10g\n", $1 * factor; next } { print }'
}

# Negate the three lattice vectors of a POSCAR (default ./POSCAR) whose lattice is left-handed (a
# negative determinant), which VASP refuses.
VASP_CHECK_AND_FIX_POSCAR() { # [poscar]
  _vt_rewrite "${1:-POSCAR}" '
    { line[NR] = $0 }
    NR >= 3 && NR <= 5 { for (j = 1; j <= 3; j++) a[NR - 2, j] = $j }
    END {
      det = a[1,1] * (a[2,2] * a[3,3] - a[2,3] * a[3,2]) - a[1,2] * (a[2,1] * a[3,3] - a[2,3] * a[3,1]) + a[1,3] * (a[2,1] * a[3,2] - a[2,2] * a[3,1])
      for (i = 1; i <= NR; i++) {
        if (det < 0 && i >= 3 && i <= 5) printf "  %.16f %.16f %.16f\n", -a[i-2,1], -a[i-2,2], -a[i-2,3]
        else print line[i]
      }
    }'
}

# Displace a POSCAR's (default ./POSCAR) lattice components by up to AMOUNT (default 0.01) of
# themselves and its atoms by up to AMOUNT in their coordinates' units, at random.
VASP_RATTLE_POSCAR() { # [poscar] [amount]
  local file=POSCAR amount=0.01
  if [[ -n ${1-} && -f $1 ]]; then
    file=$1 amount=${2:-0.01}
  elif [[ -n ${1-} ]]; then
    amount=$1
  fi
  _vt_rewrite "$file" -v amount="$amount" -v seed="$RANDOM" '
    function jitter() { return amount * (2 * rand() - 1) }
    BEGIN { srand(seed) }
    NR == 7 { for (i = 1; i <= NF; i++) atoms += $i }
    NR == 8 && /^[ \t]*[sS]/ { selective = 1 }
    NR >= 3 && NR <= 5 { printf "  %.16f %.16f %.16f\n", $1 * (1 + jitter()), $2 * (1 + jitter()), $3 * (1 + jitter()); next }
    NR > 8 + selective && NR <= 8 + selective + atoms && NF >= 3 {
      printf "  %.16f %.16f %.16f", $1 + jitter(), $2 + jitter(), $3 + jitter()
      for (i = 4; i <= NF; i++) printf " %s", $i
      print ""; next }
    { print }'
}

# Write OUTPUT (default ./POSCAR) from CONTCAR with its first line (the comment, which v1 templates fill
# with the structure's tags) restored from the REFERENCE POSCAR.
VASP_CONTCAR_TO_POSCAR() { # <contcar> <reference> [output]
  local output=${3:-POSCAR} first
  IFS= read -r first <"$2" || return 1
  { printf '%s\n' "$first"; command tail -n +2 -- "$1"; } >"$output.httk-v1.tmp" &&
    command mv -f -- "$output.httk-v1.tmp" "$output"
}

# ---- reading VASP's outputs ------------------------------------------------------------------------

# Print the last E0 of OSZICAR (default ./OSZICAR). Returns 1 when it has none.
VASP_GET_ENERGY() { # [oszicar]
  command awk '{ for (i = 1; i < NF; i++) if ($i == "E0=") { e = $(i + 1); found = 1 } else if ($i ~ /^E0=./) { e = substr($i, 4); found = 1 } }
    END { if (found) print e; exit !found }' "${1:-OSZICAR}" 2>/dev/null || return 1
}

# Print the last volume of vasprun.xml (default ./vasprun.xml). Returns 1 when it has none.
VASP_GET_VOLUME() { # [vasprun.xml]
  command awk -F '[<>]' '/<i name="volume">/ { v = $3; gsub(/[ \t]/, "", v); found = 1 }
    END { if (found) print v; exit !found }' "${1:-vasprun.xml}" 2>/dev/null || return 1
}

# Print the last ionic "opt step" OUTCAR (default ./OUTCAR) reports. Returns 1 when it has none.
VASP_EXTRACT_POTIM() { # [outcar]
  command awk 'match($0, /opt step *= *[-+0-9.Ee]+/) { s = substr($0, RSTART, RLENGTH); sub(/.*= */, "", s); found = 1 }
    END { if (found) print s; exit !found }' "${1:-OUTCAR}" 2>/dev/null || return 1
}

# Print the last "maximum number of plane-waves" OUTCAR (default ./OUTCAR) reports. Returns 1 when none.
VASP_EXTRACT_NBR_PLANEWAVES() { # [outcar]
  command awk '/maximum number of plane-waves/ { n = $NF; found = 1 } END { if (found) print n; exit !found }' \
    "${1:-OUTCAR}" 2>/dev/null || return 1
}

# Write OUTPUT (default OUTCAR.cleaned) from OUTCAR (default ./OUTCAR) without its per-k-point blocks
# (from a "k-point N :" line to the blank line after it), which are most of a large OUTCAR.
VASP_CLEAN_OUTCAR() { # [outcar] [output]
  command awk '/^ *k-point +[0-9]+ *:/ { skipping = 1; next } skipping && !NF { skipping = 0; next } !skipping' \
    "${1:-OUTCAR}" >"${2:-OUTCAR.cleaned}"
}

# ---- preparing a calculation -----------------------------------------------------------------------

# Complete ./INCAR for ./POSCAR (and ./POTCAR): EDIFF and EDIFFG when either is missing, from ACCURACY
# eV per atom (default 1e-3; the remedies EDIFF_SMALLER(_2) make it 1e-4 (1e-5)) as EDIFF =
# max(ACCURACY NATOMS / MARGIN, 1e-6) and EDIFFG = max(ACCURACY NATOMS, 1e-4) (MARGIN 500 with NSW > 1,
# else 33); NPAR = int(sqrt(HT_NBR_NODES)) when unset; MAGMOM from VASP_MAGMOMLINE; NBANDS from
# VASP_NBANDSLINE when unset; then every remedy of the directory; ICHARG=1 becomes 2 unless CHGCAR is
# there and empty.
VASP_PREPARE_INCAR() { # [accuracy [margin]]
  local accuracy=${1:-1e-3} margin=${2-} natoms nsw line value
  natoms=$(command awk 'NR == 7 { for (i = 1; i <= NF; i++) n += $i; print n; exit }' POSCAR)
  nsw=$(VASP_GET_TAG NSW) || nsw=0
  if [[ -z $margin ]]; then
    margin=33
    ! HT_FTEST "$nsw > 1" || margin=500
  fi
  if ! VASP_GET_TAG EDIFF >/dev/null; then
    _vt_has_remedy EDIFF_SMALLER && accuracy=1e-4
    _vt_has_remedy EDIFF_SMALLER_2 && accuracy=1e-5
  fi
  if ! VASP_GET_TAG EDIFF >/dev/null || ! VASP_GET_TAG EDIFFG >/dev/null; then
    VASP_SET_TAG EDIFF "$(HT_FCALC "max($accuracy * $natoms / $margin, 1e-6)")"
    VASP_SET_TAG EDIFFG "$(HT_FCALC "max($accuracy * $natoms, 1e-4)")"
  fi
  _vt_default_tag NPAR "$(HT_FCALC "int(sqrt(${HT_NBR_NODES:-1}))")"
  VASP_SET_TAG MAGMOM "$(VASP_MAGMOMLINE)"
  if ! VASP_GET_TAG NBANDS >/dev/null && value=$(VASP_NBANDSLINE); then
    VASP_SET_TAG NBANDS "$value"
  fi
  while IFS= read -r line; do
    _vt_apply_remedy "$line"
  done < <(_vt_remedy_lines)
  if [[ $(VASP_GET_TAG ICHARG) == 1 && (! -e CHGCAR || -s CHGCAR) ]]; then
    VASP_SET_TAG ICHARG 2
  fi
}

# Apply one remedy line to ./INCAR: TAG=VALUE, -TAG, or one of v1's keywords (k-point and band
# keywords are VASP_KPOINTSLINE's and VASP_NBANDSLINE's).
_vt_apply_remedy() { # <line>
  case $1 in
    -*) _vt_unset_tag "${1#-}" ;;
    *=*) VASP_SET_TAG "${1%%=*}" "${1#*=}" ;;
    NOSYM) VASP_SET_TAG ISYM 0 ;;
    GAUSSMEAR) VASP_SET_TAG ISMEAR 0 && VASP_SET_TAG SIGMA 0.05 ;;
    LREALFALSE) VASP_SET_TAG LREAL .FALSE. ;;
    SOFTMIX) VASP_SET_TAG ICHARG 2 && VASP_SET_TAG AMIX 0.10 && VASP_SET_TAG BMIX 0.01 ;;
    SOFTMIX2) VASP_SET_TAG ICHARG 2 && VASP_SET_TAG BMIX 3.00 && VASP_SET_TAG AMIN 0.01 ;;
    ALGOALL) VASP_SET_TAG ALGO ALL && VASP_SET_TAG TIME 0.4 ;;
    ALGOALL2) VASP_SET_TAG ALGO All && VASP_SET_TAG TIME 0.05 ;;
    ALGODAMPED) VASP_SET_TAG ALGO Damped && VASP_SET_TAG TIME 0.05 ;;
    LOWSYMPREC) VASP_SET_TAG SYMPREC 1e-4 ;;
    HIGHSYMPREC) VASP_SET_TAG SYMPREC 1e-6 ;;
    NPARONE) VASP_SET_TAG NPAR 1 ;;
    BUMP_NEDOS) _vt_default_tag NEDOS 1000 ;;
  esac
}

# End the transaction (or the step) as broken when the current directory's path is longer than 240
# characters, which VASP cannot open files below.
VASP_CHECK_PATH_LENGTH() {
  ((${#PWD} <= 240)) && return 0
  printf 'VASP_CHECK_PATH_LENGTH: the path %s is longer than 240 characters\n' "$PWD"
  if [[ ${PWD##*/} == ht.tmp.atomic.* ]]; then
    HT_TASK_ATOMIC_SECTION_END_BROKEN
  fi
  HT_TASK_BROKEN
}

# Prepare the calculation in the current directory: the POSCAR's handedness, KPOINTS at density 20,
# the INCAR, the path length.
VASP_PREPARE_CALC() {
  VASP_CHECK_AND_FIX_POSCAR && VASP_PREPARE_KPOINTS 20 && VASP_PREPARE_INCAR && VASP_CHECK_PATH_LENGTH
}

# Remove the outputs of an earlier VASP run from the current directory.
VASP_PRECLEAN() {
  command rm -f -- WAVECAR CONTCAR OUTCAR OSZICAR CHGCAR CHG vasprun.xml DOSCAR EIGENVAL IBZKPT PCDAT \
    PROCAR XDATCAR REPORT STOPCAR vasp.out vasp.err stdout.out ht.controlled.msgs
}

# ---- running VASP and remedying it -----------------------------------------------------------------

# Run VASP (COMMAND, default the words of $VASP_EXECUTE) in the current directory for at most TIMEOUT
# seconds, watched for the errors of the VASP package's catalog; ht.controlled.msgs says what it saw.
# Returns 0 (finished), 2 (not finished: an error, a crash, or stopped for an error), 4 (finished
# with the last ionic step at NELM or NSW used up), 99 (timeout), 3 (SIGTERM); SIGINT declares the
# task broken (exit 4), as v1 did.
VASP_RUN_CONTROLLED() { # <timeout> [command...]
  local timeout=$1 status=0
  local -a command=("${@:2}")
  if ((${#command[@]} == 0)); then
    read -r -a command <<<"${VASP_EXECUTE-}"
  fi
  if ((${#command[@]} == 0)); then
    printf 'VASP_RUN_CONTROLLED: no command given and VASP_EXECUTE is empty\n' >&2
    return 2
  fi
  _vt_python run "$timeout" -- "${command[@]}" || status=$?
  ((status != 100)) || HT_TASK_BROKEN
  return "$status"
}

# After a failed run, inside a transaction: write the next remedy of the run's first problem (the
# VASP package's ladder). Returns 0 (run the step again), 2 (the cell is too small: expand it) or 3
# (give up).
VASP_INPUTS_FIX_ERROR() {
  _vt_python fix
}

# After an accepted run, inside a transaction: the next remedy of the run's first problem, if it has
# one. Returns 0 (a remedy was written) or 1 (nothing to adjust).
VASP_INPUTS_ADJUST() {
  _vt_python adjust
}
