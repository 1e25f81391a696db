import { diedOf } from "#edition"
import { describe, expect, expectTypeOf, it } from "@effect/vitest"
import { Duration, Effect, Exit } from "effect"
import { Failure } from "effect-resilience"

class HttpError {
  readonly _tag = "HttpError"
  constructor(readonly status: number) {}
}

describe("Failure", () => {
  it("constructors build tagged errors users can catch by tag", () => {
    const r = Failure.retryable("503", "2 seconds")
    expect(r._tag).toBe("Retryable")
    expect(r.cause).toBe("503")
    expect(r.retryAfter).toEqual(Duration.seconds(2))
    expect(Failure.retryable("x").retryAfter).toBeUndefined()
    const f = Failure.fatal("400")
    expect(f._tag).toBe("Fatal")
    expect(f.cause).toBe("400")
    expect(Failure.isRetryable(r) && !Failure.isRetryable(f) && Failure.isFatal(f) && !Failure.isFatal(null)).toBe(true)
    expect(r.message).toContain("retryable")
  })

  it.effect("classify maps every typed failure with the user's function", () =>
    Effect.gen(function*() {
      const call = (status: number) => Effect.fail(new HttpError(status))
      const classify = Failure.classify((e: HttpError) => e.status >= 500 ? Failure.retryable(e) : Failure.fatal(e))
      const a = yield* Effect.exit(classify(call(503)))
      const b = yield* Effect.exit(classify(call(404)))
      expect(a).toEqual(Exit.fail(new Failure.Retryable({ cause: new HttpError(503) })))
      expect(b).toEqual(Exit.fail(new Failure.Fatal({ cause: new HttpError(404) })))
      const caught = yield* classify(call(404)).pipe(Effect.catchTag("Fatal", (e) => Effect.succeed(e.cause.status)))
      expect(caught).toBe(404)
    }))

  it.effect("retryWhen: matching failures are Retryable, the rest Fatal; defects untouched", () =>
    Effect.gen(function*() {
      const policy = Failure.retryWhen((e: HttpError) => e.status === 503)
      expect(yield* Effect.exit(policy(Effect.fail(new HttpError(503))))).toEqual(
        Exit.fail(new Failure.Retryable({ cause: new HttpError(503) }))
      )
      expect(yield* Effect.exit(policy(Effect.fail(new HttpError(400))))).toEqual(
        Exit.fail(new Failure.Fatal({ cause: new HttpError(400) }))
      )
      const died = yield* Effect.exit(policy(Effect.die("bug")))
      expect(diedOf(died)).toBe(true)
    }))

  it("the error channel says what may be retried", () => {
    const classified = Failure.retryWhen(Effect.fail(new HttpError(503)), (e) => e.status === 503)
    expectTypeOf(classified).toEqualTypeOf<
      Effect.Effect<never, Failure.Retryable<HttpError> | Failure.Fatal<HttpError>>
    >()
  })
})
