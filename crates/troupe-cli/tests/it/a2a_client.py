# The official A2A Python SDK (a2a-sdk 1.x) as a client of `troupe serve`:
# one scenario per run, one JSON document of what it saw on stdout. The Rust
# test that runs it asserts on that document.
#
#   python a2a_client.py <scenario> '<json args>'
#
# args: base (the server's URL), binding (JSONRPC or HTTP+JSON), token, and
# per scenario: metadata, text, task, ...
import asyncio, json, sys

import httpx
from google.protobuf.json_format import MessageToDict
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.utils.errors import A2AError
from a2a.helpers.proto_helpers import new_text_message
from a2a.types.a2a_pb2 import (
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, Role, SendMessageRequest,
    SubscribeToTaskRequest, TaskState,
)

ARGS = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
INTERRUPTED = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
TERMINAL = {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED,
            TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED}


def d(m):
    return MessageToDict(m)


def http(version="1.0"):
    headers = {"A2A-Version": version}
    if ARGS.get("token"):
        headers["Authorization"] = "Bearer " + ARGS["token"]
    return httpx.AsyncClient(headers=headers, timeout=60)


async def client(streaming=False, polling=True, version="1.0"):
    config = ClientConfig(streaming=streaming, polling=polling, httpx_client=http(version),
                          supported_protocol_bindings=[ARGS.get("binding", "JSONRPC")])
    return await ClientFactory(config).create_from_url(ARGS["base"])


def message(text, metadata, task_id=None, context_id=None):
    m = new_text_message(text, role=Role.ROLE_USER)
    m.metadata.update(metadata)
    if task_id:
        m.task_id = task_id
    if context_id:
        m.context_id = context_id
    return m


async def send(c, text, metadata, **kw):
    """SendMessage; the events the client yields (one task when not streaming)."""
    events = []
    async for e in c.send_message(SendMessageRequest(message=message(text, metadata, **kw))):
        events.append(e)
    return events


async def wait_state(c, task_id, states, timeout=60):
    async def poll():
        while True:
            t = await c.get_task(GetTaskRequest(id=task_id))
            if t.status.state in states:
                return t
            await asyncio.sleep(0.05)
    return await asyncio.wait_for(poll(), timeout)


async def error_of(coro):
    try:
        await coro
        return None
    except A2AError as e:
        return {"type": type(e).__name__, "text": str(e)}


async def card():
    async with http() as h:
        resolved = await A2ACardResolver(h, ARGS["base"]).get_agent_card()
    return {"card": d(resolved)}


async def send_get_list():
    """SendMessage (non-blocking), GetTask, ListTasks, on one binding."""
    c = await client()
    [event] = await send(c, ARGS["text"], ARGS["metadata"])
    task = event.task
    got = await c.get_task(GetTaskRequest(id=task.id, history_length=1))
    listed = await c.list_tasks(ListTasksRequest(page_size=ARGS.get("page_size", 50)))
    missing = await error_of(c.get_task(GetTaskRequest(id="no-such-task")))
    await c.close()
    return {"sent": d(task), "got": d(got), "listed": d(listed), "missing": missing}


async def blocking():
    """SendMessage in blocking mode: returns when the task settles."""
    c = await client(polling=False)
    [event] = await send(c, ARGS["text"], ARGS["metadata"])
    await c.close()
    return {"task": d(event.task)}


async def stream():
    """SendStreamingMessage: every event until the stream closes; the
    scenario's `then` completes the work on the side (a board claim/complete by
    the test, through a file handshake)."""
    c = await client(streaming=True)
    events = []
    async for e in c.send_message(SendMessageRequest(message=message(ARGS["text"], ARGS["metadata"]))):
        events.append(d(e))
        if len(events) == 1:
            with open(ARGS["started"], "w") as f:
                f.write(e.task.id)
    await c.close()
    return {"events": events}


async def subscribe():
    """SubscribeToTask on an existing task until it ends."""
    c = await client(streaming=True)
    events = []
    async for e in c.subscribe(SubscribeToTaskRequest(id=ARGS["task"])):
        events.append(d(e))
        if len(events) == 1:
            with open(ARGS["started"], "w") as f:
                f.write("subscribed")
    await c.close()
    return {"events": events}


async def cancel():
    """CancelTask on a task, then again (not cancelable any more)."""
    c = await client()
    task = await c.cancel_task(CancelTaskRequest(id=ARGS["task"]))
    again = await error_of(c.cancel_task(CancelTaskRequest(id=ARGS["task"])))
    follow = await error_of(send(c, "more", {}, task_id=ARGS["task"]))
    await c.close()
    return {"task": d(task), "again": again, "follow_up": follow}


async def version():
    """Requests in a version troupe does not speak, through the SDK."""
    out = {}
    for v in ["0.3", "2.0"]:
        c = await client(version=v)
        out[v] = await error_of(send(c, "hi", ARGS["metadata"]))
        await c.close()
    return out


async def plan_round_trip():
    """message-teammate in plan mode: the task waits (INPUT_REQUIRED) with the
    plan as an artifact; a follow-up approves it; the teammate's answer
    completes it. The teammate is an obedient MCP client of `troupe mcp serve`
    (see teammate())."""
    c = await client()
    [event] = await send(c, ARGS["text"], ARGS["metadata"])
    task = event.task
    teammate_run = asyncio.create_task(teammate())
    waiting = await wait_state(c, task.id, INTERRUPTED | TERMINAL)
    early = await error_of(send(c, "maybe", {}, task_id=task.id))
    mismatched = await error_of(send(c, "approve", {}, task_id=task.id, context_id="another-context"))
    [after] = await send(c, "approve", {}, task_id=task.id, context_id=task.context_id)
    done = await wait_state(c, task.id, TERMINAL)
    said = await asyncio.wait_for(teammate_run, 60)
    await c.close()
    return {"sent": d(task), "waiting": d(waiting), "undecided": early, "mismatched": mismatched,
            "after_decision": d(after.task), "done": d(done), "teammate": said}


async def teammate():
    """builder-1, obedient: reads its mailbox through the gateway, does what
    the message says (request_plan_approval with the named approver, then
    send_message to it), and reports what the gateway answered."""
    from mcp import Client, StdioServerParameters
    server = StdioServerParameters(command=ARGS["troupe"], args=["-C", ARGS["root"], "mcp", "serve", "--role", "builder", "--agent", "builder-1"])
    async with Client(server) as mcp:
        async def call(tool, args):
            r = await mcp.call_tool("troupe__" + tool, args)
            text = "\n".join(x.text for x in r.content if getattr(x, "text", None) is not None)
            if r.is_error:
                raise RuntimeError(f"{tool}: {text}")
            return json.loads(text)
        while True:
            inbox = (await call("read_messages", {}))["messages"]
            if inbox:
                break
            await asyncio.sleep(0.05)
        body = inbox[0]["body"]
        approver = body.split("approver `", 1)[1].split("`", 1)[0]
        held = shell_hook()
        decision = await call("request_plan_approval", {"plan": "1. write the parser tests\n2. make them pass", "approver": approver, "wait_seconds": 30})
        await call("send_message", {"to": approver, "body": "done: 2 tests added"})
        return {"received": body, "approver": approver, "decision": decision, "held": held, "released": shell_hook()}


def shell_hook():
    """What troupe's PreToolUse hook answers builder-1's shell command, as
    Claude Code would ask it."""
    import os, subprocess
    env = dict(os.environ, TROUPE_AGENT_ID="builder-1", TROUPE_ROLE="builder", TROUPE_PROJECT=str(ARGS["root"]))
    event = {"session_id": "a2a-plan", "cwd": str(ARGS["root"]), "hook_event_name": "PreToolUse",
             "tool_name": "Bash", "tool_input": {"command": "echo planning"}, "tool_use_id": "t1"}
    r = subprocess.run([ARGS["troupe"], "hook", "claude", "PreToolUse"], input=json.dumps(event),
                       capture_output=True, text=True, env=env, timeout=60)
    return r.stdout + r.stderr


async def rpc():
    """Raw requests, for the tests of the specification's MUSTs: each call is
    JSON-RPC (`method`, `params`) or HTTP+JSON (`http`, `path`, `body`), with
    `version` as the A2A-Version header (null: none). Streams are read to
    their end; `then` names a file the test waits for before it acts."""
    results = []
    async with httpx.AsyncClient(timeout=60) as h:
        for i, call in enumerate(ARGS["calls"]):
            headers = {}
            if call.get("version", "1.0") is not None:
                headers["A2A-Version"] = call.get("version", "1.0")
            if ARGS.get("token"):
                headers["Authorization"] = "Bearer " + ARGS["token"]
            if "method" in call:
                body = {"jsonrpc": "2.0", "id": i + 1, "method": call["method"], "params": call.get("params", {})}
                req = h.build_request("POST", ARGS["base"] + "/a2a/jsonrpc", json=body, headers=headers)
            else:
                url = ARGS["base"] + "/a2a/rest" + call["path"]
                req = h.build_request(call.get("http", "POST"), url, json=call.get("body"), headers=headers)
            r = await h.send(req, stream=True)
            if r.headers.get("content-type", "").startswith("text/event-stream"):
                events = []
                async for line in r.aiter_lines():
                    if line.startswith("data:"):
                        events.append(json.loads(line[5:]))
                        if len(events) == 1 and call.get("started"):
                            with open(call["started"], "w") as f:
                                f.write("1")
                results.append({"status": r.status_code, "events": events})
            else:
                await r.aread()
                try:
                    parsed = r.json()
                except Exception:
                    parsed = r.text
                results.append({"status": r.status_code, "body": parsed})
    return {"results": results}


SCENARIOS = {f.__name__: f for f in [card, send_get_list, blocking, stream, subscribe, cancel, version, plan_round_trip, rpc]}

if __name__ == "__main__":
    print(json.dumps(asyncio.run(SCENARIOS[sys.argv[1]]())), flush=True)
