/** The resilient client over a scripted in-memory server, and what its tests read of exits. */
import { Cause, Effect, Exit, Option } from "effect"
import { HttpClient } from "effect/http"
import { Backoff, ResilientHttpClient } from "../../src/index.js"
import { scriptedClient, type Step } from "./memoryHttp.js"

export const fast = Backoff.exponential({ base: "100 millis", cap: "1 second" })

/** The preset over a scripted in-memory server. */
export const scripted = (script: ReadonlyArray<Step>, options: ResilientHttpClient.Options = {}) =>
  Effect.gen(function*() {
    const { client, log, seen } = yield* scriptedClient(script)
    const http = yield* ResilientHttpClient.make({ retry: { schedule: fast, maxAttempts: 3 }, ...options }).pipe(
      Effect.provideService(HttpClient.HttpClient, client)
    )
    return { http, seen, log, base: client }
  })

/** The typed failure of an exit, if any. */
export const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.findErrorOption(exit.cause)) : undefined

/**
 * Forks `effect` and runs it at once, up to its first sleep: Effect 4's `TestClock.adjust` waits for the fibers it
 * wakes, not for one forked just before (which would start sleeping after the clock had moved on).
 */
export const fork = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.forkChild(effect, { startImmediately: true })

export const statusOf = (effect: Effect.Effect<{ readonly status: number }, unknown>) =>
  Effect.map(Effect.exit(effect), Exit.map((r) => r.status))
