#!/usr/bin/python3
"""A fake desktop notification server and file manager on a private session bus, for the agent's notification tests.

Usage: fake-notifications.py BUS_ADDRESS OUT CONTROL [CAPABILITY...]
Owns org.freedesktop.Notifications (Notify, GetCapabilities, GetServerInformation, CloseNotification) and
org.freedesktop.FileManager1 (ShowItems) on the bus at BUS_ADDRESS, prints "ready" once both are exported, and writes
one JSON line to OUT per call: {"notify": {...}, "id": N} or {"showItems": [uris]}. Every 50 ms it reads CONTROL:
lines "invoke ID KEY" (emits ActionInvoked(ID, KEY), each line once) and "quit". GetCapabilities answers "actions",
"body" and the CAPABILITY arguments (e.g. body-markup).
Needs python3-dbus and python3-gi (Debian).
"""
import json
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

NOTIFICATIONS = "org.freedesktop.Notifications"
FILE_MANAGER = "org.freedesktop.FileManager1"


def record(out, value):
    with open(out, "a") as f:
        f.write(json.dumps(value) + "\n")


class Notifications(dbus.service.Object):
    def __init__(self, bus, out, capabilities):
        super().__init__(bus, "/org/freedesktop/Notifications")
        self.out = out
        self.next_id = 1
        self.capabilities = ["actions", "body"] + capabilities

    @dbus.service.method(NOTIFICATIONS, in_signature="susssasa{sv}i", out_signature="u")
    def Notify(self, app_name, replaces_id, app_icon, summary, body, actions, hints, expire_timeout):
        nid = self.next_id
        self.next_id += 1
        record(self.out, {"id": nid, "notify": {
            "app": str(app_name), "icon": str(app_icon), "summary": str(summary), "body": str(body),
            "actions": [str(a) for a in actions], "hints": {str(k): str(v) for k, v in hints.items()},
            "timeout": int(expire_timeout)}})
        return nid

    @dbus.service.method(NOTIFICATIONS, in_signature="", out_signature="as")
    def GetCapabilities(self):
        return self.capabilities

    @dbus.service.method(NOTIFICATIONS, in_signature="", out_signature="ssss")
    def GetServerInformation(self):
        return ("fake", "halftunes-tests", "1", "1.2")

    @dbus.service.method(NOTIFICATIONS, in_signature="u", out_signature="")
    def CloseNotification(self, nid):
        pass

    @dbus.service.signal(NOTIFICATIONS, signature="us")
    def ActionInvoked(self, nid, key):
        pass


class FileManager(dbus.service.Object):
    def __init__(self, bus, out):
        super().__init__(bus, "/org/freedesktop/FileManager1")
        self.out = out

    @dbus.service.method(FILE_MANAGER, in_signature="ass", out_signature="")
    def ShowItems(self, uris, startup_id):
        record(self.out, {"showItems": [str(u) for u in uris]})


def main():
    address, out, control = sys.argv[1], sys.argv[2], sys.argv[3]
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(address)
    names = [dbus.service.BusName(NOTIFICATIONS, bus), dbus.service.BusName(FILE_MANAGER, bus)]
    notifications = Notifications(bus, out, sys.argv[4:])
    files = FileManager(bus, out)
    loop = GLib.MainLoop()
    done = set()

    def poll():
        try:
            with open(control) as f:
                lines = [line.strip() for line in f if line.strip()]
        except FileNotFoundError:
            return True
        for line in lines:
            if line == "quit":
                loop.quit()
                return False
            if line in done:
                continue
            done.add(line)
            word, nid, key = line.split(" ", 2)
            if word == "invoke":
                notifications.ActionInvoked(dbus.UInt32(int(nid)), key)
        return True

    GLib.timeout_add(50, poll)
    print("ready", flush=True)
    loop.run()
    del names, files


if __name__ == "__main__":
    main()
