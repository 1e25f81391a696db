import { fork } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { Criticality } from "effect-resilience"

describe("Criticality", () => {
  it.effect("is default unless set, and the nearest setting wins", () =>
    Effect.gen(function*() {
      expect(yield* Criticality.current).toBe("default")
      const inner = yield* Criticality.current.pipe(
        Criticality.withCriticality("critical"),
        Criticality.withCriticality("sheddable")
      )
      expect(inner).toBe("critical")
      expect(yield* Criticality.withCriticality(Criticality.current, "sheddable")).toBe("sheddable")
      expect(yield* Criticality.current).toBe("default")
    }))

  it.effect("forked fibers inherit it", () =>
    Effect.gen(function*() {
      const seen = yield* fork(Criticality.current).pipe(
        Effect.flatMap(Fiber.join),
        Criticality.withCriticality("sheddable")
      )
      expect(seen).toBe("sheddable")
    }))

  it("parses header values strictly and refuses unknown levels when set", () => {
    expect(Criticality.parse("CRITICAL")).toBe("critical")
    expect(Criticality.parse("critical;q=1")).toBeUndefined()
    expect(() => Criticality.withCriticality("urgent" as Criticality.Criticality)).toThrow(
      /critical, default or sheddable/
    )
  })
})
