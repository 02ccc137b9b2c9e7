#include "CSystemBus.h"
#include <errno.h>
#include <string.h>
#include <systemd/sd-bus.h>

sd_bus *htd_bus_open_system(int *error) {
    sd_bus *bus = NULL;
    int r = sd_bus_open_system(&bus);
    if (r < 0) {
        *error = r;
        return NULL;
    }
    *error = 0;
    return bus;
}

void htd_bus_close(sd_bus *bus) {
    if (bus) sd_bus_flush_close_unref(bus);
}

static int is_missing(const sd_bus_error *e) {
    if (!sd_bus_error_is_set(e)) return 0;
    return sd_bus_error_has_name(e, SD_BUS_ERROR_SERVICE_UNKNOWN) ||
           sd_bus_error_has_name(e, SD_BUS_ERROR_NAME_HAS_NO_OWNER) ||
           sd_bus_error_has_name(e, SD_BUS_ERROR_UNKNOWN_OBJECT) ||
           sd_bus_error_has_name(e, SD_BUS_ERROR_UNKNOWN_INTERFACE) ||
           sd_bus_error_has_name(e, SD_BUS_ERROR_UNKNOWN_PROPERTY) ||
           sd_bus_error_has_name(e, SD_BUS_ERROR_UNKNOWN_METHOD);
}

int htd_bus_get_u32(sd_bus *bus, const char *destination, const char *path, const char *interface,
                    const char *member, uint32_t *value, int *missing) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    int r = sd_bus_get_property_trivial(bus, destination, path, interface, member, &e, 'u', value);
    *missing = r < 0 && is_missing(&e);
    sd_bus_error_free(&e);
    return r < 0 ? r : 0;
}

int htd_bus_get_bool(sd_bus *bus, const char *destination, const char *path, const char *interface,
                     const char *member, int *value, int *missing) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    int v = 0;
    int r = sd_bus_get_property_trivial(bus, destination, path, interface, member, &e, 'b', &v);
    *missing = r < 0 && is_missing(&e);
    *value = v ? 1 : 0;
    sd_bus_error_free(&e);
    return r < 0 ? r : 0;
}

static int ignore(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)m;
    (void)userdata;
    (void)error;
    return 0;
}

int htd_bus_watch(sd_bus *bus) {
    int r = sd_bus_add_match(bus, NULL,
                             "type='signal',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged'",
                             ignore, NULL);
    if (r < 0) return r;
    return sd_bus_add_match(bus, NULL,
                            "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',"
                            "member='NameOwnerChanged'",
                            ignore, NULL);
}

int htd_bus_step(sd_bus *bus, uint64_t usec) {
    int any = 0;
    for (;;) {
        int r = sd_bus_process(bus, NULL);
        if (r < 0) return r;
        if (r > 0) {
            any = 1;
            continue;
        }
        if (any) return 1;
        r = sd_bus_wait(bus, usec);
        if (r < 0) return r;
        if (r == 0) return 0;
        usec = 0;
    }
}
