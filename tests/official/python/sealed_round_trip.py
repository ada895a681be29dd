"""The official Python client's encryption round trip, for scripts/official-clients.sh.

Configures a queue with `encryption_enabled` through the client, pushes one payload that
carries a fresh marker, pops it back and checks the client sees it in clear, then acks it.
Prints one line, `queue=<name> marker=<marker>`, for the script's next step: reading the
stored row with psql and checking the payload there is sealed (ENC-2, ENC-4).

Usage: python sealed_round_trip.py URL QUEUE
"""

import asyncio
import sys
import uuid

from queen import Queen


async def main(url: str, queue: str) -> int:
    marker = f"clear-text-{uuid.uuid4().hex}"
    payload = {"secret": marker, "note": "the official client's encryption round trip"}
    client = Queen(url)
    try:
        configured = await client.queue(queue).config({"encryption_enabled": True}).create()
        options = configured.get("options", {})
        if configured.get("configured") is not True or options.get("encryptionEnabled") is not True:
            print(f"configure did not enable encryption: {configured}", file=sys.stderr)
            return 1
        pushed = await client.queue(queue).push([{"data": payload}])
        if not pushed or pushed[0].get("status") != "queued":
            print(f"push was not queued: {pushed}", file=sys.stderr)
            return 1
        popped = await client.queue(queue).batch(1).wait(True).pop()
        if not popped or popped[0].get("data") != payload:
            print(f"pop did not give the payload back in clear: {popped}", file=sys.stderr)
            return 1
        await client.ack(popped[0], True)
    finally:
        await client.close()
    print(f"queue={queue} marker={marker}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2])))
