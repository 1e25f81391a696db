import { describe, expect, it } from "vitest"
import * as Fleet from "../src/breakerFleet.js"
import * as Protocol from "../src/breakerFleetProtocol.js"
import { fleetScriptSource } from "../src/breakerFleetScript.js"

// The fleet breaker's protocol: the arguments and reply of its Lua script (breakerFleetScript.ts) as tables, and
// the script read against them. (Whether the script decides as breakerFleetModel.ts does needs a Redis: the
// contract suite CircuitBreaker.script.redis.int.test.ts runs it.)

const call: Protocol.Call = {
  op: "success",
  now: 1234,
  epoch: 7,
  inc: "r1.5",
  since: 1200,
  token: "r2",
  delay: 500,
  asked: 900,
  trialTimeout: 300,
  permits: 3,
  failureRate: 0.5,
  leaseMillis: 1000,
  trip: {
    _tag: "FailureRate",
    threshold: 0.5,
    minimumCalls: 4,
    window: { _tag: "Count", calls: 10 },
    slowCall: undefined
  },
  deltas: { calls: 5, failures: 2, slow: 1, trailing: 1, sawSuccess: true, asked: 900 }
}

describe("core/breakerFleetProtocol", () => {
  it("encodes every argument at its place in the table", () => {
    const argv = Protocol.encode(call, "cb:{x}:events")
    expect(argv).toHaveLength(Protocol.args.length)
    const at = (name: Protocol.Arg) => argv[Protocol.args.indexOf(name)]
    expect([at("op"), at("now"), at("epoch"), at("inc"), at("since"), at("token"), at("channel")]).toEqual([
      "success",
      "1234",
      "7",
      "r1.5",
      "1200",
      "r2",
      "cb:{x}:events"
    ])
    expect([at("kind"), at("p1"), at("threshold"), at("minimumCalls"), at("slowRate")]).toEqual([
      "n",
      "10",
      "0.5",
      "4",
      "0"
    ])
    expect([at("calls"), at("failures"), at("slow"), at("trailing"), at("sawSuccess")]).toEqual([
      "5",
      "2",
      "1",
      "1",
      "1"
    ])
    expect([at("permits"), at("failureRate"), at("lease")]).toEqual(["3", "0.5", "1000"])
    expect(Protocol.encode({ ...call, failureRate: undefined }, "c")[Protocol.args.indexOf("failureRate")]).toBe("0")
    expect(new Set(Protocol.args).size).toBe(Protocol.args.length)
  })

  it("the script reads exactly the arguments of the table, and replies exactly its fields", () => {
    const read = new Set([...fleetScriptSource.matchAll(/\bA\.(\w+)/g)].map((m) => m[1]))
    expect([...read].sort()).toEqual([...Protocol.args].sort())
    const replyTable = /local R = \{([^}]*)\}/.exec(fleetScriptSource)![1]!
    const set = [...replyTable.matchAll(/(\w+) =/g)].map((m) => m[1])
    expect(set.sort()).toEqual([...Protocol.replyFields].sort())
  })

  it("decodes a reply, and rejects a malformed one", () => {
    const view = ["r1.5", "8", "closed", "0", "0", "0", "1234", "0"]
    expect(Protocol.decodeReply([1, 0, ...view])).toEqual({
      granted: true,
      opened: false,
      view: Fleet.fromFields(view)
    })
    expect(Protocol.decodeReply([0, 1, ...view])).toMatchObject({ granted: false, opened: true })
    expect(Protocol.decodeReply([2, 0, ...view])).toBeUndefined()
    expect(Protocol.decodeReply([1, 0, ...view.slice(1)])).toBeUndefined()
    expect(Protocol.decodeReply("OK")).toBeUndefined()
  })
})
