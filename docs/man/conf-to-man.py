#!/usr/bin/env python3
"""Writes halftunesd.conf(5) from docs/configuration.md, so the man page says what the documentation says.

Usage: conf-to-man.py docs/configuration.md VERSION > halftunesd.conf.5

Handles the Markdown that configuration.md uses: ## and ### headings, paragraphs, "- " and "1. " lists,
fenced code blocks, tables (the key table becomes one entry per key), `code`, **bold**, *emphasis* and
[links](target). Anything else is an error, so a change to the document cannot silently garble the page.
"""
import re
import sys

FIRST_SECTION = "NAME"
NAME_LINE = r"halftunesd.conf \- configuration file of the halftunesd(8) background download daemon"
SYNOPSIS = [
    r"\fI/etc/halftunesd/halftunesd.conf\fR (root and the system service)",
    r"\fI$XDG_CONFIG_HOME/halftunesd/halftunesd.conf\fR (\fI~/.config/halftunesd/halftunesd.conf\fR, any other user)",
    r"\fBhalftunesd \-\-config\fR \fIpath\fR",
]
SEE_ALSO = r"\fBhalftunesd\fR(8), \fBhalftunesctl\fR(1), \fBsystemd.socket\fR(5), \fBsystemctl\fR(1)"


def escape(text):
    """Escapes man(7) specials in plain text (before inline markup is turned into font changes)."""
    return text.replace("\\", "\\e").replace("-", "\\-")


def inline(text):
    """Markdown inline markup to man font changes; the rest escaped."""
    out = []
    pos = 0
    pattern = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*|\*([^*]+)\*|\[([^\]]+)\]\(([^)]+)\)")
    for m in pattern.finditer(text):
        out.append(escape(text[pos:m.start()]))
        code, bold, emph, link_text, _target = m.groups()
        if code is not None:
            out.append("\\fB" + escape(code) + "\\fR")
        elif bold is not None:
            out.append("\\fB" + inline(bold) + "\\fR")
        elif emph is not None:
            out.append("\\fI" + inline(emph) + "\\fR")
        else:
            out.append(inline(link_text))
        pos = m.end()
    out.append(escape(text[pos:]))
    return "".join(out)


def line(text):
    """One output line; a leading . or ' would be read as a request."""
    return "\\&" + text if text[:1] in (".", "'") else text


def cells(row):
    """The cells of a Markdown table row (a | inside `code` is not a separator in this document)."""
    parts, current, in_code = [], "", False
    for ch in row.strip().strip("|"):
        if ch == "`":
            in_code = not in_code
        if ch == "|" and not in_code:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    parts.append(current.strip())
    return parts


def table(rows, out):
    header = cells(rows[0])
    if not re.fullmatch(r"\|?(\s*:?-+:?\s*\|)+\s*:?-*:?\s*\|?", rows[1].strip()):
        raise SystemExit(f"conf-to-man: not a table separator: {rows[1]!r}")
    for row in rows[2:]:
        values = cells(row)
        if len(values) != len(header):
            raise SystemExit(f"conf-to-man: {len(values)} cells where the header has {len(header)}: {row!r}")
        out.append(".TP")
        out.append(line(inline(values[0])))
        if len(header) == 2:
            out.append(line(inline(values[1])))
            continue
        # The last column is the meaning; the ones between are labelled facts (option, default, ...).
        facts = [f"{escape(header[i])}: {inline(values[i])}" for i in range(1, len(header) - 1) if values[i]]
        if facts:
            out.append(line("(" + "; ".join(facts) + ")"))
            out.append(".br")
        out.append(line(inline(values[-1])))


def convert(markdown, version):
    lines = markdown.split("\n")
    out = [
        ".\\\" Generated from docs/configuration.md by docs/man/conf-to-man.py; edit those, not this.",
        f'.TH HALFTUNESD.CONF 5 "" "halftunesd {version}" "File Formats Manual"',
        ".SH NAME",
        NAME_LINE,
        ".SH SYNOPSIS",
    ]
    for i, s in enumerate(SYNOPSIS):
        if i:
            out.append(".br")
        out.append(s)
    out.append(".SH DESCRIPTION")
    i = 0
    paragraph = []

    def flush():
        if paragraph:
            out.append(".PP")
            out.extend(line(inline(p)) for p in paragraph)
            paragraph.clear()

    while i < len(lines):
        text = lines[i]
        stripped = text.strip()
        if text.startswith("# "):  # the document's title: the NAME section says it
            i += 1
        elif text.startswith("## "):
            flush()
            out.append(".SH " + escape(text[3:].strip().upper()))
            i += 1
        elif text.startswith("### "):
            flush()
            out.append(".SS " + inline(text[4:].strip()))
            i += 1
        elif stripped.startswith("```"):
            flush()
            i += 1
            out.extend([".PP", ".RS 4", ".nf"])
            while i < len(lines) and not lines[i].strip().startswith("```"):
                out.append(line(escape(lines[i])))
                i += 1
            if i == len(lines):
                raise SystemExit("conf-to-man: an unclosed code block")
            out.extend([".fi", ".RE"])
            i += 1
        elif stripped.startswith("|"):
            flush()
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(lines[i])
                i += 1
            table(rows, out)
        elif re.match(r"^(- |\d+\. )", text):
            flush()
            while i < len(lines) and re.match(r"^(- |\d+\. )", lines[i]):
                m = re.match(r"^(- |(\d+)\. )(.*)$", lines[i])
                mark = "\\(bu" if m.group(2) is None else m.group(2) + "."
                item = [m.group(3)]
                i += 1
                while i < len(lines) and lines[i].startswith("  ") and lines[i].strip():
                    item.append(lines[i].strip())
                    i += 1
                out.append(f'.IP "{mark}" 4')
                out.extend(line(inline(p)) for p in item)
        elif not stripped:
            flush()
            i += 1
        else:
            paragraph.append(stripped)
            i += 1
    flush()
    out.append(".SH SEE ALSO")
    out.append(SEE_ALSO)
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: conf-to-man.py docs/configuration.md VERSION")
    with open(sys.argv[1], encoding="utf-8") as f:
        sys.stdout.write(convert(f.read(), sys.argv[2]))


if __name__ == "__main__":
    main()
