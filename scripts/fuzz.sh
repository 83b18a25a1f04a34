#!/usr/bin/env bash
# Fuzzes the decoders of bytes from the network with atheris (libFuzzer for Python;
# tests/fuzz/targets.py): the binlog decoder with the compiled row kernel, the range reader
# over it (statements, DDL, column completion), and the text-row splitter. The C kernels are built here with AddressSanitizer, UBSan and libFuzzer's
# coverage counters, and loaded instead of the package's (tests/fuzz/run.py).
#
#   bash scripts/fuzz.sh [SECONDS per target, default 60] [TARGET ...]   (binlog range textrows)
#
# A long campaign: `nice -n 19 bash scripts/fuzz.sh 3600 binlog`. New inputs go to
# $SPARKCDC_FUZZ_DIR/corpus/TARGET (the seeds in tests/fuzz/corpus stay as committed); a
# crash, a leak of a Python exception the targets do not allow, a timeout (10 s) or a
# sanitizer report stops the run with the input saved as $SPARKCDC_FUZZ_DIR/crashes/TARGET-*
# and the exit status non-zero: add it to tests/fuzz/regressions/TARGET/ with the fix.
# Needs clang and its sanitizer runtimes (scripts/setup_fuzz.sh installs them and atheris).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
SECONDS_EACH="${1:-60}"
shift || true
TARGETS=("$@")
[ "${#TARGETS[@]}" -gt 0 ] || TARGETS=(binlog range textrows)
WORK="${SPARKCDC_FUZZ_DIR:-${TMPDIR:-/tmp}/sparkcdc-fuzz-$(id -u)}"
BUILD="$WORK/build"
mkdir -p "$BUILD"

command -v clang >/dev/null 2>&1 || { echo "fuzz: no clang; run scripts/setup_fuzz.sh" >&2; exit 2; }
RT="$(clang -print-resource-dir)/lib/linux"
[ -f "$RT/libclang_rt.fuzzer_no_main-x86_64.a" ] || {
  echo "fuzz: clang's libFuzzer runtime is missing ($RT); run scripts/setup_fuzz.sh" >&2
  exit 2
}

# libFuzzer and ASan in one library, loaded first (LD_PRELOAD): the kernels' coverage counters
# and ASan's interceptors must be in place before Python loads anything (atheris's
# setup_utils/merge_libfuzzer_sanitizer.sh does the same)
RUNTIME="$BUILD/asan_with_fuzzer.so"
if [ ! -f "$RUNTIME" ]; then
  cp "$RT/libclang_rt.asan-x86_64.a" "$BUILD/asan.a"
  ar d "$BUILD/asan.a" asan_preinit.cpp.o
  clang++ -Wl,--whole-archive "$RT/libclang_rt.fuzzer_no_main-x86_64.a" "$BUILD/asan.a" \
    -Wl,--no-whole-archive -lpthread -ldl -shared -o "$RUNTIME"
fi

INCLUDE="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
SUFFIX="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
MYSQL=src/sparkcdc/mysql  # the kernels' shared _arrowbuf.h is here
for source in "$MYSQL/binlog/_rowkernel.c" "$MYSQL/protocol/_textrows.c"; do
  kernel="$(basename "$source" .c)"
  built="$BUILD/$kernel$SUFFIX"
  if [ ! -f "$built" ] || [ "$source" -nt "$built" ] || [ "$MYSQL/_arrowbuf.h" -nt "$built" ]; then
    clang -shared -fPIC -g -O1 -fno-omit-frame-pointer \
      -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined \
      -I"$INCLUDE" -I"$MYSQL" "$source" -o "$built"
  fi
done

status=0
for target in "${TARGETS[@]}"; do
  mkdir -p "$WORK/corpus/$target" "$WORK/crashes"
  seeds=(tests/fuzz/corpus/"${target/range/binlog}")  # range reads the binlog seeds
  [ -d tests/fuzz/regressions/"$target" ] && seeds+=(tests/fuzz/regressions/"$target")
  echo "fuzz: $target for ${SECONDS_EACH}s"
  LD_PRELOAD="$RUNTIME" \
    ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:handle_abort=1" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    SPARKCDC_FUZZ_KERNELS="$BUILD" \
    "$PYTHON" -m tests.fuzz.run "$target" \
    -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=3072 -print_final_stats=1 \
    -artifact_prefix="$WORK/crashes/$target-" \
    "$WORK/corpus/$target" "${seeds[@]}" || status=$?
done
exit "$status"
