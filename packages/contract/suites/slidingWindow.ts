import { expect, it } from "@effect/vitest"
import { Effect, type Layer } from "effect"
import { RateLimiterStore } from "effect-resilience"

/**
 * Registers the regression test of a sliding window whose length is not whole milliseconds: the previous
 * window was recognised by `start - previousStart === window` in floating point, which is almost never true
 * for such windows, so every new window forgot the previous one (20 requests in ~1 ms through a limit of 10).
 */
export const fractionalSlidingWindow = (
  name: string,
  layer: Layer.Layer<RateLimiterStore.RateLimiterStore>
) =>
  it.effect(`${name}: a sliding window that is not whole milliseconds remembers the previous window`, () =>
    Effect.gen(function*() {
      const store = yield* RateLimiterStore.RateLimiterStore
      for (const windowMillis of [0.3, 1.1, 33.3, 1000.7]) {
        const params = { name: "fractional", limit: 10, windowMillis }
        const key = `fractional-${windowMillis}-${Math.random().toString(36).slice(2)}`
        const index = Math.floor(1_700_000_000_000 / windowMillis)
        for (let i = 0; i < 10; i++) {
          expect((yield* store.slidingWindow(key, 1, params, (index + 0.99) * windowMillis)).allowed).toBe(true)
        }
        // 1% into the next window the previous 10 still weigh 9.9: one more does not fit
        const next = yield* store.slidingWindow(key, 1, params, (index + 1.01) * windowMillis)
        expect(next.allowed).toBe(false)
      }
    }).pipe(Effect.provide(layer)))
