#!/bin/sh
# The option reference in docs/options/ is generated from each binary's option table
# (`--help-markdown`). `gen-docs.sh write` regenerates it; `gen-docs.sh check` (make test)
# fails when a table and its document disagree.
set -eu
cd "$(dirname "$0")/.."
mode=${1:-check}
out=docs/options
[ "$mode" = write ] && mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for b in bin/*; do
	[ -f "$b" ] && [ -x "$b" ] || continue # bin/static/ and the like
	"$b" --help-markdown >/dev/null 2>&1 || continue # helpers without an option table
	name=$(basename "$b")
	{
		echo "# $name options"
		echo
		echo "Generated from the option table of \`$name\` by \`make docs\`; do not edit by hand."
		if "$b" --help | grep -q -- "--config"; then
			echo "Every option can also be set in the file given by \`--config\` (libconfig syntax, same names),"
			echo "and precedence is: config file < environment < command line."
		else
			echo "It reads no config file; the command line overrides the environment variables below."
		fi
		echo
		"$b" --help-markdown
	} >"$tmp/$name.md"
	if [ "$mode" = write ]; then
		cp "$tmp/$name.md" "$out/$name.md"
	elif ! cmp -s "$tmp/$name.md" "$out/$name.md"; then
		echo "docs: $out/$name.md is out of date with the option table of $name (run: make docs)"
		diff -u "$out/$name.md" "$tmp/$name.md" | head -20 || true
		status=1
	fi
done
[ "$mode" = check ] && [ $status -eq 0 ] && echo "docs: option reference matches every option table"
exit $status
