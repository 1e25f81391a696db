import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Metric } from "effect"
import { Bulkhead } from "../src/index.js"

// Effect 4 keeps metrics in a `Metric.MetricRegistry` of the context; Effect 3 has one global registry, so this case
// is this edition's own (the rest of Bulkhead is the shared contract's).

const rejectionsOf = (name: string, reason: Bulkhead.RejectionReason) =>
  Metric.value(Metric.withAttributes(Bulkhead.rejectionsTotal, { bulkhead: name, reason })).pipe(
    Effect.map((state) => state.count)
  )

const activeOf = (name: string) =>
  Metric.value(Bulkhead.activeGauge.pipe(Metric.withAttributes({ bulkhead: name }))).pipe(
    Effect.map((state) => state.value)
  )

describe("Bulkhead", () => {
  it.effect("counts in the metric registry of the context it was built in", () =>
    Effect.gen(function*() {
      const registry: Metric.MetricRegistry = new Map()
      const name = "registry-test"
      const bulkhead = yield* Bulkhead.make({ maxConcurrent: 1, maxQueue: 0, name }).pipe(
        Effect.provideService(Metric.MetricRegistry, registry)
      )
      const running = yield* Effect.forkChild(bulkhead.protect(Effect.never), { startImmediately: true })
      yield* Effect.flip(bulkhead.protect(Effect.void))
      const inRegistry = <A>(effect: Effect.Effect<A>) => Effect.provideService(effect, Metric.MetricRegistry, registry)
      expect(yield* inRegistry(activeOf(name))).toBe(1)
      expect(yield* inRegistry(rejectionsOf(name, "queue-full"))).toBe(1)
      // the default registry never saw this bulkhead
      expect(yield* activeOf(name)).toBe(0)
      yield* Fiber.interrupt(running)
      expect(yield* inRegistry(activeOf(name))).toBe(0)
    }))
})
