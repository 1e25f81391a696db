import { describe, expect, it } from "vitest"
import { LeaseLink, LeaseQueue } from "../src/leaseQueue.js"

class Named extends LeaseLink {
  constructor(readonly name: string) {
    super()
  }
}

const names = (links: ReadonlyArray<Named>) => links.map((l) => l.name)

describe("core/leaseQueue", () => {
  it("hands out the links due, in the order they joined, each `every` after it joined", () => {
    const q = new LeaseQueue<Named>(100)
    const [a, b, c] = [new Named("a"), new Named("b"), new Named("c")]
    q.push(a, 0)
    q.push(b, 10)
    q.push(c, 20)
    expect(q.first?.due).toBe(100)
    expect(names(q.takeDue(105))).toEqual(["a"])
    expect(names(q.takeDue(120))).toEqual(["b", "c"])
    expect(q.first).toBeUndefined()
  })

  it("never puts a due time before the one ahead of it, even when the clock steps back", () => {
    const q = new LeaseQueue<Named>(100)
    const [a, b] = [new Named("a"), new Named("b")]
    q.push(a, 50)
    q.push(b, 0)
    expect([a.due, b.due]).toEqual([150, 150])
  })

  it("takes a link out from anywhere; an ended link never joins again", () => {
    const q = new LeaseQueue<Named>(100)
    const [a, b, c] = [new Named("a"), new Named("b"), new Named("c")]
    for (const l of [a, b, c]) q.push(l, 0)
    q.end(b)
    q.remove(b) // twice is harmless
    expect(names(q.takeDue(100))).toEqual(["a", "c"])
    expect(q.renewed(a, true, 100)).toBe(true)
    expect(q.renewed(b, true, 100)).toBe(false)
    expect(q.renewed(c, false, 100)).toBe(false)
    expect(names(q.takeDue(1000))).toEqual(["a"])
  })
})
