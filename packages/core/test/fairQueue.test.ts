import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { FairQueue } from "../src/fairQueue.js"
import { prop } from "./support/prop.js"

interface Item {
  readonly partition: string
  readonly seq: number
}

type Op =
  | { readonly _tag: "push"; readonly partition: string; readonly times: number }
  | { readonly _tag: "shift" }
  | { readonly _tag: "leave"; readonly partition: string }

const partitions = ["a", "b", "c", "d"]
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    _tag: fc.constant("push" as const),
    // one greedy partition sends up to 10 at a time, the others a few
    partition: fc.constantFrom(...partitions),
    times: fc.integer({ min: 1, max: 10 })
  }),
  fc.record({ _tag: fc.constant("shift" as const) }),
  fc.record({ _tag: fc.constant("leave" as const), partition: fc.constantFrom(...partitions) })
)

describe("core/fairQueue", () => {
  prop(
    "work-conserving, first in first out per partition, and fair between partitions that keep waiting",
    [fc.array(op, { maxLength: 200 })],
    ([ops]) => {
      const queue = new FairQueue<Item>()
      const model = new Map<string, Array<Item>>(partitions.map((p) => [p, []]))
      let seq = 0
      // for every shift: who was waiting just before it, and who was served
      const served: Array<{ readonly waiting: ReadonlySet<string>; readonly partition: string }> = []
      for (const o of ops) {
        if (o._tag === "push") {
          for (let i = 0; i < o.times; i++) {
            const item = { partition: o.partition, seq: seq++ }
            queue.push(o.partition, item)
            model.get(o.partition)!.push(item)
          }
        } else if (o._tag === "leave") {
          // a waiter that stopped waiting (interrupted, timed out): the oldest of its partition here
          const waiters = model.get(o.partition)!
          const gone = waiters.shift()
          expect(queue.delete(o.partition, gone ?? { partition: o.partition, seq: -1 })).toBe(gone !== undefined)
        } else {
          const waiting = new Set(partitions.filter((p) => model.get(p)!.length > 0))
          const item = queue.shift()
          // work-conserving: a slot goes to someone whenever anyone waits
          expect(item === undefined).toBe(waiting.size === 0)
          if (item === undefined) continue
          // FIFO within the partition
          expect(model.get(item.partition)!.shift()).toBe(item)
          served.push({ waiting, partition: item.partition })
        }
        const total = [...model.values()].reduce((n, w) => n + w.length, 0)
        expect(queue.size).toBe(total)
      }
      // over any run of shifts during which two partitions both waited throughout, their counts differ by <= 1
      for (let i = 0; i < served.length; i++) {
        const counts = new Map<string, number>()
        let always = new Set(served[i]!.waiting)
        for (let j = i; j < served.length; j++) {
          always = new Set([...always].filter((p) => served[j]!.waiting.has(p)))
          counts.set(served[j]!.partition, (counts.get(served[j]!.partition) ?? 0) + 1)
          const shares = [...always].map((p) => counts.get(p) ?? 0)
          if (shares.length > 1) expect(Math.max(...shares) - Math.min(...shares)).toBeLessThanOrEqual(1)
        }
      }
    }
  )

  it("a greedy partition with 10× the waiters gets one slot in three beside two others", () => {
    const queue = new FairQueue<string>()
    for (let i = 0; i < 100; i++) queue.push("greedy", `g${i}`)
    for (let i = 0; i < 10; i++) {
      queue.push("a", `a${i}`)
      queue.push("b", `b${i}`)
    }
    const first = Array.from({ length: 30 }, () => queue.shift()!)
    expect(first.filter((x) => x.startsWith("g"))).toHaveLength(10)
    expect(first.filter((x) => x.startsWith("a"))).toHaveLength(10)
    // alone, it gets everything
    const rest = Array.from({ length: 90 }, () => queue.shift()!)
    expect(rest.every((x) => x.startsWith("g"))).toBe(true)
    expect(queue.shift()).toBeUndefined()
  })

  it("a full queue makes room from its longest partition, never below the newcomer's", () => {
    const queue = new FairQueue<string>()
    for (let i = 0; i < 4; i++) queue.push("greedy", `g${i}`)
    queue.push("a", "a0")
    expect(queue.evictFor("a")).toBe("g3") // greedy 4 > a 1 + 1: its newest goes
    expect(queue.waiting("greedy")).toBe(3)
    queue.push("a", "a1")
    expect(queue.evictFor("a")).toBe(undefined) // greedy 3 is not more than a's 2 + 1
    expect(queue.evictFor("greedy")).toBe(undefined)
    expect(queue.evictFor("new")).toBe("g2")
    expect(queue.drainAll()).toEqual(["g0", "a0", "g1", "a1"])
    expect(queue.size).toBe(0)
  })
})
