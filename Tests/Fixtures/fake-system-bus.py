#!/usr/bin/python3
"""A fake NetworkManager and UPower on a private D-Bus, for the tests of halftunesd's network and power conditions.

Usage: fake-system-bus.py BUS_ADDRESS CONTROL_FILE [--no-upower]
Owns org.freedesktop.NetworkManager (Metered, Connectivity, State) and, unless --no-upower, org.freedesktop.UPower
(OnBattery) on the bus at BUS_ADDRESS, prints "ready" once both are exported, then every 50 ms reads CONTROL_FILE:
lines "Name=value" (Metered=1, Connectivity=1, State=20, OnBattery=true; "quit" ends it). A changed value is set
and announced with org.freedesktop.DBus.Properties.PropertiesChanged, as the real services do.
Needs python3-dbus and python3-gi (Debian).
"""
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

PROPS = "org.freedesktop.DBus.Properties"


class Service(dbus.service.Object):
    def __init__(self, bus, path, interface, values):
        super().__init__(bus, path)
        self.interface = interface
        self.values = values

    @dbus.service.method(PROPS, in_signature="ss", out_signature="v")
    def Get(self, interface, name):
        if interface != self.interface or name not in self.values:
            raise dbus.exceptions.DBusException("no such property", name="org.freedesktop.DBus.Error.UnknownProperty")
        return self.values[name]

    @dbus.service.method(PROPS, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        return dict(self.values) if interface == self.interface else {}

    @dbus.service.signal(PROPS, signature="sa{sv}as")
    def PropertiesChanged(self, interface, changed, invalidated):
        pass

    def set(self, name, value):
        if self.values.get(name) != value:
            self.values[name] = value
            self.PropertiesChanged(self.interface, {name: value}, [])


def main():
    address, control = sys.argv[1], sys.argv[2]
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(address)
    nm_name = dbus.service.BusName("org.freedesktop.NetworkManager", bus)
    nm = Service(bus, "/org/freedesktop/NetworkManager", "org.freedesktop.NetworkManager",
                 {"Metered": dbus.UInt32(4), "Connectivity": dbus.UInt32(4), "State": dbus.UInt32(70)})
    services = {"Metered": nm, "Connectivity": nm, "State": nm}
    keep = [nm_name]
    if "--no-upower" not in sys.argv:
        up_name = dbus.service.BusName("org.freedesktop.UPower", bus)
        up = Service(bus, "/org/freedesktop/UPower", "org.freedesktop.UPower", {"OnBattery": dbus.Boolean(False)})
        services["OnBattery"] = up
        keep.append(up_name)
    loop = GLib.MainLoop()

    def poll():
        try:
            with open(control) as f:
                lines = f.read().split()
        except FileNotFoundError:
            return True
        for line in lines:
            if line == "quit":
                loop.quit()
                return False
            name, _, text = line.partition("=")
            if name == "OnBattery":
                services[name].set(name, dbus.Boolean(text == "true"))
            elif name in services:
                services[name].set(name, dbus.UInt32(int(text)))
        return True

    GLib.timeout_add(50, poll)
    print("ready", flush=True)
    loop.run()


if __name__ == "__main__":
    main()
