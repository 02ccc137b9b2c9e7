#!/usr/bin/env python3
# A TCP relay on 127.0.0.1 that paces what the server sends on each connection (bytes per second), so a server
# with no pacing of its own (BusyBox httpd) can be split and interrupted in the tests. The requests pass unchanged.
# Usage: pacing-relay.py LISTEN_PORT TARGET_PORT BYTES_PER_SECOND
import socket
import sys
import threading
import time

listen_port, target_port, rate = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", listen_port))
listener.listen(64)


def pump(source, target, paced):
    start, sent = time.monotonic(), 0
    try:
        while True:
            data = source.recv(16384)
            if not data:
                break
            target.sendall(data)
            if paced:
                sent += len(data)
                ahead = sent / rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
    except OSError:
        pass
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve(client):
    try:
        server = socket.create_connection(("127.0.0.1", target_port))
    except OSError:
        client.close()
        return
    threading.Thread(target=pump, args=(client, server, False), daemon=True).start()
    pump(server, client, True)
    client.close()
    server.close()


while True:
    connection, _ = listener.accept()
    threading.Thread(target=serve, args=(connection,), daemon=True).start()
