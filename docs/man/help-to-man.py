#!/usr/bin/env python3
"""Writes a man page for one of our executables from its ArgumentParser definitions.

Usage: help-to-man.py BINARY SECTION VERSION > NAME.SECTION

It reads what `BINARY --experimental-dump-help` prints: the ToolInfo JSON (serialization version 0) that
ArgumentParser's own generate-manual tool reads. (That tool is reachable only through the GenerateManual
plugin, which first builds every product again in a configuration of its own and without
`--static-swift-stdlib`, so it cannot run from `make install` on the release binaries.) Every command, option,
flag and argument, with its help text, default and allowed values, comes from the binary; nothing is written
by hand here but the page's frame (NAME, SYNOPSIS, SEE ALSO, FILES and ENVIRONMENT pointers).
"""
import json
import subprocess
import sys

SEE_ALSO = {
    "halftunesd": [("halftunesctl", 1), ("halftunesd.conf", 5), ("systemd.socket", 5), ("journalctl", 1)],
    "halftunesctl": [("halftunesd", 8), ("halftunesd.conf", 5)],
}
FILES = {
    "halftunesd": [
        ("/etc/halftunesd/halftunesd.conf", "configuration of the system daemon (see halftunesd.conf(5))"),
        ("/var/lib/halftunesd/", "journal and keys of the system daemon; downloads in downloads/<uid>/"),
        ("/run/halftunesd/control.sock", "control socket of the system daemon (halftunesd.socket)"),
        ("$XDG_RUNTIME_DIR/halftunesd/control.sock", "control socket of a user's daemon"),
        ("$XDG_STATE_HOME/halftunesd/", "journal of a user's daemon (~/.local/state/halftunesd)"),
    ],
    "halftunesctl": [
        ("$XDG_RUNTIME_DIR/halftunesd/control.sock", "the user's daemon, tried first"),
        ("/run/halftunesd/control.sock", "the system daemon (members of group halftunesd), tried next"),
    ],
}
ENVIRONMENT = {
    "halftunesd": [
        ("LISTEN_FDS, LISTEN_FDNAMES, NOTIFY_SOCKET, WATCHDOG_USEC, JOURNAL_STREAM",
         "set by systemd: socket activation, readiness and status, watchdog, journald logging"),
        ("XDG_CONFIG_HOME, XDG_STATE_HOME, XDG_RUNTIME_DIR, XDG_DOWNLOAD_DIR", "default paths of a user's daemon"),
    ],
    "halftunesctl": [("HALFTUNES_SOCKET", "the control socket to use when --socket is not given")],
}


def esc(text):
    return text.replace("\\", "\\e").replace("-", "\\-")


def lines(text):
    """Paragraphs of help text as man lines; a leading . or ' would be read as a request."""
    out = []
    for paragraph in text.split("\n\n"):
        if out:
            out.append(".PP")
        for raw in paragraph.split("\n"):
            raw = raw.strip()
            if raw:
                out.append(("\\&" if raw[:1] in ".'" else "") + esc(raw))
    return out


def flag_names(arg):
    names = []
    for n in arg.get("names", []):
        prefix = {"long": "--", "short": "-", "longWithSingleDash": "-"}.get(n["kind"], "--")
        names.append(prefix + n["name"])
    return names


def argument_entry(arg):
    """`.TP` entry for one option, flag or positional argument."""
    value = arg.get("valueName", "value")
    if arg["kind"] == "positional":
        head = "\\fI" + esc(value) + "\\fR" + ("..." if arg.get("isRepeating") else "")
    else:
        names = ", ".join("\\fB" + esc(n) + "\\fR" for n in flag_names(arg))
        head = names + (" \\fI" + esc(value) + "\\fR" if arg["kind"] == "option" else "")
    out = [".TP", head]
    text = arg.get("abstract", "")
    if arg.get("discussion"):
        text += ("\n\n" if text else "") + arg["discussion"]
    extras = []
    if arg.get("allValues"):
        extras.append("one of: " + ", ".join(arg["allValues"]))
    if arg.get("defaultValue") not in (None, ""):
        extras.append("default: " + str(arg["defaultValue"]))
    if arg.get("isRepeating") and arg["kind"] != "positional":
        extras.append("may be repeated")
    if extras:
        text += (" " if text else "") + "(" + "; ".join(extras) + ")"
    out += lines(text) or ["\\&"]
    return out


def synopsis(command, path):
    parts = ["\\fB" + esc(" ".join(path)) + "\\fR"]
    for arg in command.get("arguments", []):
        if not arg.get("shouldDisplay", True) or arg.get("preferredName", {}).get("name") in ("help", "version"):
            continue
        if arg["kind"] == "positional":
            word = "\\fI" + esc(arg.get("valueName", "value")) + "\\fR" + ("..." if arg.get("isRepeating") else "")
        else:
            name = flag_names({"names": [arg["preferredName"]]})[0]
            word = "\\fB" + esc(name) + "\\fR" + (" \\fI" + esc(arg.get("valueName", "value")) + "\\fR"
                                                   if arg["kind"] == "option" else "")
        parts.append("[" + word + "]" if arg.get("isOptional") else word)
    if command.get("subcommands"):
        parts.append("\\fIsubcommand\\fR")
    return " ".join(parts)


def describe(command, path, out, level):
    """A command's usage, description and arguments; then its subcommands, one subsection each."""
    if level > 0:
        out.append(".SS " + esc(" ".join(path[1:])))
        out.append(synopsis(command, path))
        out.append(".PP")
        out += lines(command.get("abstract", ""))
    if level > 0 and command.get("discussion"):
        out.append(".PP")
        out += lines(command["discussion"])
    shown = [a for a in command.get("arguments", []) if a.get("shouldDisplay", True)]
    if shown:
        if level == 0:
            out.append(".SH OPTIONS")
        for arg in shown:
            out += argument_entry(arg)
    subs = [s for s in command.get("subcommands", []) if s.get("shouldDisplay", True) and s["commandName"] != "help"]
    if subs and level == 0:
        out.append(".SH COMMANDS")
    for sub in subs:
        describe(sub, path + [sub["commandName"]], out, level + 1)


def page(info, section, version):
    command = info["command"]
    name = command["commandName"]
    out = [
        f".\\\" Generated from `{name} --experimental-dump-help` by docs/man/help-to-man.py; do not edit.",
        f'.TH {name.upper()} {section} "" "halftunesd {version}" '
        + ('"System Manager\'s Manual"' if section == 8 else '"User Commands"'),
        ".SH NAME",
        f"{esc(name)} \\- {esc(command.get('abstract', ''))}",
        ".SH SYNOPSIS",
        synopsis(command, [name]),
    ]
    if command.get("discussion"):
        out.append(".SH DESCRIPTION")
        out += lines(command["discussion"])
    describe(command, [name], out, 0)
    if ENVIRONMENT.get(name):
        out.append(".SH ENVIRONMENT")
        for var, text in ENVIRONMENT[name]:
            out += [".TP", "\\fB" + esc(var) + "\\fR", esc(text)]
    if FILES.get(name):
        out.append(".SH FILES")
        for path, text in FILES[name]:
            out += [".TP", "\\fI" + esc(path) + "\\fR", esc(text)]
    out.append(".SH SEE ALSO")
    out.append(", ".join(f"\\fB{esc(n)}\\fR({s})" for n, s in SEE_ALSO.get(name, [])))
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 4:
        raise SystemExit("usage: help-to-man.py BINARY SECTION VERSION")
    binary, section, version = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    dump = subprocess.run([binary, "--experimental-dump-help"], check=True, capture_output=True, text=True).stdout
    info = json.loads(dump)
    if info.get("serializationVersion") != 0:
        raise SystemExit(f"help-to-man: unknown ToolInfo serialization version {info.get('serializationVersion')}")
    sys.stdout.write(page(info, section, version))


if __name__ == "__main__":
    main()
