// The few sd-bus calls halftunesd makes, without varargs (Swift cannot call variadic C functions).
#ifndef HALFTUNES_CSYSTEMBUS_H
#define HALFTUNES_CSYSTEMBUS_H
#include <stddef.h>
#include <stdint.h>

typedef struct sd_bus sd_bus;

/// Opens the system bus (`DBUS_SYSTEM_BUS_ADDRESS` when set). NULL on failure, with `*error` a negative errno.
sd_bus *htd_bus_open_system(int *error);
void htd_bus_close(sd_bus *bus);
/// Reads one property of type `u` (or `b`, as 0/1, with htd_bus_get_bool). 0, or a negative errno;
/// `*missing` is set to 1 when the service, object or property is not there.
int htd_bus_get_u32(sd_bus *bus, const char *destination, const char *path, const char *interface,
                    const char *member, uint32_t *value, int *missing);
int htd_bus_get_bool(sd_bus *bus, const char *destination, const char *path, const char *interface,
                     const char *member, int *value, int *missing);
/// Subscribes to every `PropertiesChanged` and `NameOwnerChanged` signal: each wakes `htd_bus_step`.
int htd_bus_watch(sd_bus *bus);
/// Processes what arrived, or waits up to `usec` for something: 1 when a message was processed, 0 when
/// nothing came, or a negative errno.
int htd_bus_step(sd_bus *bus, uint64_t usec);

/// Connects to the service manager: its private socket (`$XDG_RUNTIME_DIR/systemd/private` for a user manager)
/// when given and reachable, else the user bus. NULL on failure, with `*error` a negative errno.
sd_bus *htd_bus_open_manager(const char *private_socket, int *error);
/// `StartUnit(unit, "replace")`. 0, or a negative errno with the manager's error message in `message`.
int htd_bus_start_unit(sd_bus *bus, const char *unit, char *message, size_t size);
/// The unit's `ActiveState`, its service `Result` (empty for other unit types), the id of its pending job (0:
/// none) and its main process's exit status. 0, or a negative errno with a message.
int htd_bus_unit_status(sd_bus *bus, const char *unit, char *active_state, char *result, size_t size,
                        uint32_t *job, int32_t *exit_status, char *message, size_t message_size);

/// The user's session bus (`DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`). NULL on failure, `*error` set.
sd_bus *htd_bus_open_session(int *error);
/// Where `ActionInvoked` signals wait until taken.
typedef struct htd_actions htd_actions;
/// Subscribes to `org.freedesktop.Notifications.ActionInvoked`. NULL on failure, `*error` set.
htd_actions *htd_bus_watch_actions(sd_bus *bus, int *error);
void htd_actions_free(htd_actions *actions);
/// `org.freedesktop.Notifications.Notify` (replaces nothing; hint `category`), answered within 5 s: `actions` holds
/// `n_actions` strings, key and label in turn. `*id` gets the notification's id; `q` (may be NULL) takes actions
/// from the server that answered only. 0, or a negative errno with a message.
/// Whether the notification server lists `capability` in GetCapabilities: 1, 0, or a negative errno.
int htd_bus_has_capability(sd_bus *bus, const char *capability);
int htd_bus_notify(sd_bus *bus, htd_actions *q, const char *app_name, const char *icon, const char *summary,
                   const char *body, const char **actions, size_t n_actions, const char *category, int32_t timeout,
                   uint32_t *id, char *message, size_t size);
/// Processes what arrived on the bus without waiting; 1 with the next invoked action's notification id and key,
/// 0 when none waits, or a negative errno.
int htd_bus_next_action(sd_bus *bus, htd_actions *actions, uint32_t *id, char *key, size_t size);
/// `org.freedesktop.FileManager1.ShowItems([uri], "")`. 0, or a negative errno with a message.
int htd_bus_show_items(sd_bus *bus, const char *uri, char *message, size_t size);
#endif
