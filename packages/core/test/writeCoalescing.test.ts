/**
 * Coalescing the writes of one tick (`src/writeCoalescing.ts`) on sockets that only record their corks: the
 * first write of a tick goes out at once, later ones are corked and flushed every 16 and at the end of the tick,
 * for the tick's first socket (kept outside the map) and for any other written to in the same tick alike.
 */
import { describe, expect, it } from "vitest"
import { beforeWrite, COALESCE_AT_MOST } from "../src/writeCoalescing.js"

const socket = (writable = true) => {
  const events: Array<"cork" | "uncork"> = []
  return { writable, events, cork: () => events.push("cork"), uncork: () => events.push("uncork") }
}

/** The end of the current tick: the microtasks queued so far, and the one that ends the tick, have run. */
const endOfTick = () => new Promise<void>((resolve) => setImmediate(resolve))

describe("write coalescing", () => {
  it("a lone write is not corked; the second of a tick corks until the tick ends", async () => {
    const a = socket()
    beforeWrite(a)
    await endOfTick()
    expect(a.events).toEqual([])
    beforeWrite(a)
    beforeWrite(a)
    beforeWrite(a)
    expect(a.events).toEqual(["cork"])
    await endOfTick()
    expect(a.events).toEqual(["cork", "uncork"])
  })

  it("flushes every COALESCE_AT_MOST held writes, on the first socket and on others", async () => {
    const a = socket()
    const b = socket()
    const writes = 1 + 2 * COALESCE_AT_MOST + 1
    for (let i = 0; i < writes; i++) {
      beforeWrite(a)
      beforeWrite(b)
    }
    const expected = ["cork", "uncork", "cork", "uncork", "cork"]
    expect(a.events).toEqual(expected)
    expect(b.events).toEqual(expected)
    await endOfTick()
    expect(a.events).toEqual([...expected, "uncork"])
    expect(b.events).toEqual([...expected, "uncork"])
  })

  it("a socket that is not writable is not corked; the next tick starts afresh", async () => {
    const a = socket()
    const closed = socket(false)
    beforeWrite(a)
    beforeWrite(closed)
    beforeWrite(closed)
    beforeWrite(closed)
    await endOfTick()
    expect(closed.events).toEqual([])
    // the closed socket comes first in this tick: still never corked, and the other socket still is
    beforeWrite(closed)
    beforeWrite(closed)
    beforeWrite(a)
    beforeWrite(a)
    await endOfTick()
    expect(closed.events).toEqual([])
    expect(a.events).toEqual(["cork", "uncork"])
  })
})
