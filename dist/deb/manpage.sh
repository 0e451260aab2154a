#!/bin/sh
# A manual page from a binary's --help, which the option table drives (docs/options/ has the same
# table as Markdown): Usage -> SYNOPSIS, the text before Options -> DESCRIPTION, each option -> a
# tagged paragraph, "Exit status:" -> EXIT STATUS. For the Debian packages (dist/deb/build.sh).
#
#   dist/deb/manpage.sh BINARY VERSION >NAME.1
set -eu
[ $# -eq 2 ] || { echo "usage: dist/deb/manpage.sh BINARY VERSION" >&2; exit 2; }
name=$(basename "$1")
"$1" --help | awk -v name="$name" -v version="$2" '
function esc(s) {
	gsub(/\\/, "\\e", s)
	gsub(/-/, "\\-", s)
	if (s ~ /^[.\047]/) s = "\\&" s
	return s
}
function section(title) { print ".SH " title }
BEGIN {
	state = "usage"
	printf ".TH %s 1 \"\" \"sidekick %s\" \"sidekick\"\n", toupper(name), version
}
state == "usage" && /^Usage: / {
	usage = substr($0, 8)
	state = "desc"
	next
}
state == "desc" && /^$/ { if (desc != "") desc = desc "\n"; next }
state == "desc" && /^Options:$/ {
	line = desc
	sub(/\n.*/, "", line)
	sub(/[:.].*/, "", line)
	section("NAME")
	print esc(name) " \\- " esc(line)
	section("SYNOPSIS")
	print esc(usage)
	section("DESCRIPTION")
	sub(/\n+$/, "", desc)
	n = split(desc, paras, "\n")
	for (i = 1; i <= n; i++) print (paras[i] == "" ? ".PP" : esc(paras[i]))
	section("OPTIONS")
	state = "options"
	next
}
state == "desc" { desc = desc $0 "\n"; next }
state == "options" && /^  +[-(]/ {
	line = substr($0, 3)
	sub(/^ +/, "", line)
	if (match(line, /  +/)) {
		tag = substr(line, 1, RSTART - 1)
		text = substr(line, RSTART + RLENGTH)
	} else {
		# The name column overflowed: the option, its short form and an upper-case argument.
		k = split(line, w, " ")
		tag = w[1]
		i = 2
		if (w[1] ~ /,$/) { tag = tag " " w[2]; i = 3 }
		if (w[i] ~ /^[A-Z[][A-Z0-9_:=.,[\]]*$/) { tag = tag " " w[i]; i++ }
		text = ""
		for (; i <= k; i++) text = text (text == "" ? "" : " ") w[i]
	}
	print ".TP"
	print "\\fB" esc(tag) "\\fR"
	print esc(text)
	next
}
state == "options" && /^Exit status: / {
	section("EXIT STATUS")
	print esc(substr($0, 14))
	next
}
state == "options" && /^$/ { next }
state == "options" { print ".PP"; print esc($0) }
END {
	section("SEE ALSO")
	print "/usr/share/doc/sidekick\\-probes/, /usr/share/doc/proxysql\\-sync/ (README.md, deploy.md, packages.md)"
}'
