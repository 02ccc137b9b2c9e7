#include "CSystemBus.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

/// What an sd_bus_open_* call returned: the bus, or NULL with its negative errno in *error.
static sd_bus *opened(int r, sd_bus *bus, int *error) {
    *error = r < 0 ? r : 0;
    return r < 0 ? NULL : bus;
}

sd_bus *htd_bus_open_system(int *error) {
    sd_bus *bus = NULL;
    int r = sd_bus_open_system(&bus);
    return opened(r, bus, error);
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

// ---- The service manager (relaunching a session's launchUnit) ----

sd_bus *htd_bus_open_manager(const char *private_socket, int *error) {
    sd_bus *bus = NULL;
    int r;
    // The manager's own socket first, as systemctl does: a user manager answers there without a user bus.
    if (private_socket && private_socket[0]) {
        r = sd_bus_new(&bus);
        if (r >= 0) {
            char address[4200];
            snprintf(address, sizeof address, "unix:path=%s", private_socket);
            r = sd_bus_set_address(bus, address);
            if (r >= 0) r = sd_bus_start(bus);
            if (r >= 0) {
                *error = 0;
                return bus;
            }
            sd_bus_unref(bus);
            bus = NULL;
        }
    }
    r = sd_bus_open_user(&bus);
    if (r < 0) {
        *error = r;
        return NULL;
    }
    *error = 0;
    return bus;
}

static void copy_message(const sd_bus_error *e, int r, char *message, size_t size) {
    if (!message || size == 0) return;
    if (sd_bus_error_is_set(e) && e->message) {
        snprintf(message, size, "%s", e->message);
    } else {
        snprintf(message, size, "%s", strerror(r < 0 ? -r : r));
    }
}

int htd_bus_start_unit(sd_bus *bus, const char *unit, char *message, size_t size) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message *reply = NULL;
    int r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "StartUnit", &e, &reply, "ss", unit, "replace");
    if (r < 0) copy_message(&e, r, message, size);
    sd_bus_error_free(&e);
    sd_bus_message_unref(reply);
    return r < 0 ? r : 0;
}

static int unit_path(sd_bus *bus, const char *unit, char **path, char *message, size_t size) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message *reply = NULL;
    const char *p = NULL;
    int r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "LoadUnit", &e, &reply, "s", unit);
    if (r >= 0) r = sd_bus_message_read(reply, "o", &p);
    if (r >= 0) {
        *path = strdup(p);
        if (!*path) r = -ENOMEM;
    } else {
        copy_message(&e, r, message, size);
    }
    sd_bus_error_free(&e);
    sd_bus_message_unref(reply);
    return r < 0 ? r : 0;
}

static int get_string(sd_bus *bus, const char *path, const char *interface, const char *member, char *out, size_t size) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    char *value = NULL;
    int r = sd_bus_get_property_string(bus, "org.freedesktop.systemd1", path, interface, member, &e, &value);
    if (r >= 0) snprintf(out, size, "%s", value ? value : "");
    free(value);
    sd_bus_error_free(&e);
    return r < 0 ? r : 0;
}

int htd_bus_unit_status(sd_bus *bus, const char *unit, char *active_state, char *result, size_t size,
                        uint32_t *job, int32_t *exit_status, char *message, size_t message_size) {
    char *path = NULL;
    int r = unit_path(bus, unit, &path, message, message_size);
    if (r < 0) return r;
    active_state[0] = 0;
    result[0] = 0;
    *job = 0;
    *exit_status = 0;
    r = get_string(bus, path, "org.freedesktop.systemd1.Unit", "ActiveState", active_state, size);
    if (r >= 0) {
        // The unit's pending job, if any: (uo) — a start still queued counts as not ended.
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        int q = sd_bus_get_property(bus, "org.freedesktop.systemd1", path, "org.freedesktop.systemd1.Unit", "Job", &e,
                                    &reply, "(uo)");
        if (q >= 0) {
            const char *job_path = NULL;
            uint32_t id = 0;
            if (sd_bus_message_read(reply, "(uo)", &id, &job_path) >= 0) *job = id;
        }
        sd_bus_error_free(&e);
        sd_bus_message_unref(reply);
        // A service's Result and main process exit status (absent for other unit types: left empty).
        if (get_string(bus, path, "org.freedesktop.systemd1.Service", "Result", result, size) < 0) result[0] = 0;
        sd_bus_error e2 = SD_BUS_ERROR_NULL;
        int32_t status = 0;
        if (sd_bus_get_property_trivial(bus, "org.freedesktop.systemd1", path, "org.freedesktop.systemd1.Service",
                                        "ExecMainStatus", &e2, 'i', &status) >= 0) {
            *exit_status = status;
        }
        sd_bus_error_free(&e2);
    } else {
        snprintf(message, message_size, "%s", strerror(-r));
    }
    free(path);
    return r < 0 ? r : 0;
}

// ---- Desktop notifications (the user's agent) ----

sd_bus *htd_bus_open_session(int *error) {
    sd_bus *bus = NULL;
    int r = sd_bus_open_user(&bus);
    return opened(r, bus, error);
}

/// What ActionInvoked signals brought, until taken: a small ring (older ones are dropped when it is full).
#define HTD_ACTIONS 64
struct htd_actions {
    /// The unique bus name of the server that answered the last Notify.
    char owner[256];
    uint32_t ids[HTD_ACTIONS];
    char keys[HTD_ACTIONS][64];
    size_t head, count;
};

int htd_bus_notify(sd_bus *bus, htd_actions *q, const char *app_name, const char *icon, const char *summary,
                   const char *body, const char **actions, size_t n_actions, const char *category, int32_t timeout,
                   uint32_t *id, char *message, size_t size) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message *m = NULL, *reply = NULL;
    int r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.Notifications", "/org/freedesktop/Notifications",
                                           "org.freedesktop.Notifications", "Notify");
    if (r >= 0) r = sd_bus_message_append(m, "susss", app_name, (uint32_t)0, icon, summary, body);
    if (r >= 0) r = sd_bus_message_open_container(m, 'a', "s");
    for (size_t i = 0; r >= 0 && i < n_actions; i++) r = sd_bus_message_append_basic(m, 's', actions[i]);
    if (r >= 0) r = sd_bus_message_close_container(m);
    // Hints: the specification's category ("transfer.complete", "transfer.error").
    if (r >= 0) r = sd_bus_message_append(m, "a{sv}", 1, "category", "s", category);
    if (r >= 0) r = sd_bus_message_append(m, "i", timeout);
    // A notification server that hangs must not hold whoever posts for long.
    if (r >= 0) r = sd_bus_call(bus, m, 5 * 1000 * 1000, &e, &reply);
    if (r >= 0) r = sd_bus_message_read(reply, "u", id);
    // Its actions are taken only from the server that answered (ids are its own, and restart with it).
    if (r >= 0 && q) {
        const char *sender = sd_bus_message_get_sender(reply);
        snprintf(q->owner, sizeof q->owner, "%s", sender ? sender : "");
    }
    if (r < 0) copy_message(&e, r, message, size);
    sd_bus_error_free(&e);
    sd_bus_message_unref(m);
    sd_bus_message_unref(reply);
    return r < 0 ? r : 0;
}

int htd_bus_has_capability(sd_bus *bus, const char *capability) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message *m = NULL, *reply = NULL;
    int r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.Notifications", "/org/freedesktop/Notifications",
                                           "org.freedesktop.Notifications", "GetCapabilities");
    // As for Notify: a server that hangs holds the poster 5 s at most.
    if (r >= 0) r = sd_bus_call(bus, m, 5 * 1000 * 1000, &e, &reply);
    int found = 0;
    if (r >= 0) r = sd_bus_message_enter_container(reply, 'a', "s");
    while (r >= 0) {
        const char *name = NULL;
        r = sd_bus_message_read_basic(reply, 's', &name);
        if (r <= 0) break;
        if (name && strcmp(name, capability) == 0) found = 1;
    }
    sd_bus_error_free(&e);
    sd_bus_message_unref(m);
    sd_bus_message_unref(reply);
    return r < 0 ? r : found;
}

static int on_action(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    struct htd_actions *q = userdata;
    uint32_t id = 0;
    const char *key = NULL;
    const char *sender = sd_bus_message_get_sender(m);
    if (!sender || strcmp(sender, q->owner) != 0) return 0;
    if (sd_bus_message_read(m, "us", &id, &key) < 0 || !key) return 0;
    if (q->count == HTD_ACTIONS) {
        q->head = (q->head + 1) % HTD_ACTIONS;
        q->count--;
    }
    size_t slot = (q->head + q->count) % HTD_ACTIONS;
    q->ids[slot] = id;
    snprintf(q->keys[slot], sizeof q->keys[slot], "%s", key);
    q->count++;
    return 0;
}

htd_actions *htd_bus_watch_actions(sd_bus *bus, int *error) {
    htd_actions *q = calloc(1, sizeof *q);
    if (!q) {
        *error = -ENOMEM;
        return NULL;
    }
    int r = sd_bus_match_signal(bus, NULL, NULL, "/org/freedesktop/Notifications", "org.freedesktop.Notifications",
                                "ActionInvoked", on_action, q);
    if (r < 0) {
        free(q);
        *error = r;
        return NULL;
    }
    *error = 0;
    return q;
}

void htd_actions_free(htd_actions *q) { free(q); }

int htd_bus_next_action(sd_bus *bus, htd_actions *q, uint32_t *id, char *key, size_t size) {
    if (q->count == 0) {
        for (;;) {
            int r = sd_bus_process(bus, NULL);
            if (r < 0) return r;
            if (r == 0 || q->count > 0) break;
        }
    }
    if (q->count == 0) return 0;
    *id = q->ids[q->head];
    snprintf(key, size, "%s", q->keys[q->head]);
    q->head = (q->head + 1) % HTD_ACTIONS;
    q->count--;
    return 1;
}

int htd_bus_show_items(sd_bus *bus, const char *uri, char *message, size_t size) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message *reply = NULL;
    sd_bus_message *m = NULL;
    int r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.FileManager1", "/org/freedesktop/FileManager1",
                                           "org.freedesktop.FileManager1", "ShowItems");
    if (r >= 0) r = sd_bus_message_append(m, "ass", 1, uri, "");
    if (r >= 0) r = sd_bus_call(bus, m, 5 * 1000 * 1000, &e, &reply);
    sd_bus_message_unref(m);
    if (r < 0) copy_message(&e, r, message, size);
    sd_bus_error_free(&e);
    sd_bus_message_unref(reply);
    return r < 0 ? r : 0;
}
