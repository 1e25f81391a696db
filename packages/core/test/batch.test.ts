import { describe, expect, it } from "vitest"
import { Batches } from "../src/batch.js"

const member = (key: string, id = key) => ({ key, id })

describe("core/batch", () => {
  it("the first operation of a quiet moment asks for a flush; the rest of its tick join it", () => {
    const batches = new Batches<ReturnType<typeof member>>(2, 64)
    expect(batches.add(member("a"))).toBe(true)
    expect(batches.add(member("b"))).toBe(false)
    expect(batches.add(member("c"))).toBe(false)
    expect(batches.next()?.map((m) => m.key)).toEqual(["a", "b", "c"])
    expect(batches.next()).toBeUndefined()
    expect(batches.queued).toBe(0)
  })

  it("at most maxInFlight statements go out; what queues meanwhile leaves when one is answered", () => {
    const batches = new Batches<ReturnType<typeof member>>(1, 64)
    expect(batches.add(member("a"))).toBe(true)
    expect(batches.next()?.map((m) => m.key)).toEqual(["a"])
    // one in flight: no flush is asked for, and none may go
    expect(batches.add(member("b"))).toBe(false)
    expect(batches.add(member("c"))).toBe(false)
    expect(batches.next()).toBeUndefined()
    batches.done()
    expect(batches.next()?.map((m) => m.key)).toEqual(["b", "c"])
    batches.done()
    // quiet again: the next operation asks for a flush
    expect(batches.add(member("d"))).toBe(true)
  })

  it("one statement writes a row once and takes at most maxWidth operations; the rest keep their order", () => {
    const batches = new Batches<ReturnType<typeof member>>(4, 3)
    for (const [key, id] of [["a", "a1"], ["a", "a2"], ["b", "b"], ["c", "c"], ["d", "d"], ["a", "a3"]]) {
      batches.add(member(key!, id))
    }
    expect(batches.next()?.map((m) => m.id)).toEqual(["a1", "b", "c"])
    expect(batches.next()?.map((m) => m.id)).toEqual(["a2", "d"])
    expect(batches.next()?.map((m) => m.id)).toEqual(["a3"])
    expect(batches.next()).toBeUndefined()
  })

  it("an operation whose caller left before it was sent is not sent", () => {
    const batches = new Batches<ReturnType<typeof member>>(2, 64)
    const gone = member("b")
    batches.add(member("a"))
    batches.add(gone)
    batches.remove(gone)
    batches.remove(gone) // a second time, or after it was sent: nothing
    expect(batches.next()?.map((m) => m.key)).toEqual(["a"])
  })
})
