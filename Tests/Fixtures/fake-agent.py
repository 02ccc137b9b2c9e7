#!/usr/bin/env python3
# A stand-in for the user's agent (halftunesctl agent) in the tests: connects to the daemon's socket, registers,
# writes every line it receives to OUT, and answers each agent.launch with agent.started and agent.ended
# (a unit that started and exited 0 at once). Runs until killed. Usage: fake-agent.py SOCKET OUT
import json
import socket
import sys

sock_path, out_path = sys.argv[1], sys.argv[2]
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
conn.connect(sock_path)
stream = conn.makefile("rwb")
next_id = 1


def call(method, params):
    global next_id
    stream.write((json.dumps({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params}) + "\n").encode())
    stream.flush()
    next_id += 1


call("agent.register", {})
with open(out_path, "a") as out:
    for line in stream:
        out.write(line.decode())
        out.flush()
        message = json.loads(line)
        if message.get("method") == "agent.launch":
            session, unit = message["params"]["session"], message["params"]["unit"]
            call("agent.started", {"session": session, "unit": unit})
            call("agent.ended", {"session": session, "unit": unit, "result": "success", "exitStatus": 0})
