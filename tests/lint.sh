#!/bin/sh
# Style checks run by `make lint` and CI: the pinned clang-format, and no banned functions.
set -eu
cd "$(dirname "$0")/.."
status=0
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find lib checks sync tests -name '*.[ch]')

if command -v clang-format >/dev/null 2>&1; then
	for f in $files; do
		if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
			echo "lint: $f is not formatted (run: clang-format -i $f)"
			status=1
		fi
	done
else
	echo "lint: clang-format not installed (make deps)"
	status=1
fi

# Functions with no bound or no error reporting. Use snprintf/sk_fmt, sk_strlcpy, strtol via sk_parse_long, strtok_r.
banned='\b(sprintf|vsprintf|strcpy|strcat|strncpy|strncat|gets|atoi|atol|atoll|atof|strtok)[[:space:]]*\('
if grep -nE "$banned" $files; then
	echo "lint: banned function used (see above)"
	status=1
fi
[ $status -eq 0 ] && echo "lint: ok ($(echo $files | wc -w) files)"
exit $status
