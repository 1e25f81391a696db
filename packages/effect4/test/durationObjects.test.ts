import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Option } from "effect"
import { Backoff, Deadline } from "../src/index.js"

// Effect 4's Duration.Input also takes objects (`{ seconds: 1, milliseconds: 5 }`); Effect 3's DurationInput has no
// such form, so these cases are this edition's own (the rest of Backoff and Deadline is the shared contract's).
describe("durations given as objects", () => {
  it("negative ones are rejected when built, as any negative duration", () => {
    expect(() => Backoff.equalJitter({ base: { seconds: -1 }, cap: 10 })).toThrow(/non-negative/)
    expect(() => Deadline.within({ seconds: -1 })).toThrow(/non-negative/)
  })

  it.effect("their components add up", () =>
    Effect.gen(function*() {
      const left = yield* Deadline.remaining.pipe(Deadline.within({ seconds: 1, milliseconds: 5 }))
      expect(Option.map(left, Duration.toMillis)).toEqual(Option.some(1005))
    }))
})
