"""What a test reads back from a kernel it started: what a cell printed."""


def printed_by(client, code, timeout, run=None) -> str:
    """What `code` printed in the kernel of `client` (its stream output, and an error's traceback), once the cell
    ran without an error. `run`: how to wait for an asynchronous client's call (a loop's run_until_complete)."""
    printed = []

    def keep(message):
        if message["msg_type"] == "stream":
            printed.append(message["content"]["text"])
        elif message["msg_type"] == "error":
            printed.append("\n".join(message["content"]["traceback"]))

    reply = client.execute_interactive(code, timeout=timeout, output_hook=keep)
    reply = run(reply) if run is not None else reply
    assert reply["content"]["status"] == "ok", "".join(printed) or reply["content"]
    return "".join(printed)
