import { describe, expect, it } from "@effect/vitest"
import { Effect, Random } from "effect"
import { randomId } from "../../src/internal/queue/shared.js"

/** A `Random` that always draws `x` from [0, 1). */
const always = (x: number): Random.Random => ({ nextDoubleUnsafe: () => x, nextIntUnsafe: () => 0 })

describe("randomId (Outbox ids, RedisStreamQueue consumer names)", () => {
  // Effect 4's nextIntBetween includes its upper bound unless halfOpen: a draw just below 1 must stay 4 hex digits
  it.effect("is in UUID form at both ends of Random's range", () =>
    Effect.gen(function*() {
      for (const x of [0, 0.5, 1 - Number.EPSILON]) {
        const id = yield* randomId.pipe(Effect.provideService(Random.Random, always(x)))
        expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
      }
      expect(yield* randomId.pipe(Effect.provideService(Random.Random, always(1 - Number.EPSILON)))).toBe(
        "ffffffff-ffff-ffff-ffff-ffffffffffff"
      )
    }))
})
