/**
 * The driver of the shared scenario vectors (packages/contract/vectors, README.md there), run by both editions: each
 * vector runs under the edition's TestClock, its calls in fibers of their own. A vector that passes in one edition
 * and fails in the other is a bug of that edition.
 */
import {
  errorOf,
  fork,
  type Forked,
  interruptedOnlyOf,
  pollUnsafe,
  scheduleOutputs,
  scoped,
  TestClock,
  withRandom,
  yieldNow
} from "#edition"
import {
  type CallStep,
  type Json,
  load,
  type Outcome,
  problem,
  type Step,
  type Subject,
  subjects,
  type Vector
} from "#vectors"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Clock, Duration, Effect, Exit, Fiber, Option, type Schedule } from "effect"
import {
  AdaptiveThrottle,
  Backoff,
  Bulkhead,
  Deadline,
  Failure,
  Hedge,
  RateLimiter,
  RateLimiterStore,
  Retry,
  RetryBudget
} from "effect-resilience"

/** What the driver records of one call, as the call runs. */
interface Trace {
  readonly starts: Array<number>
  readonly interrupted: Array<number>
  readonly delays: Array<number>
  ran: boolean
}

interface Call {
  readonly fiber: Forked<unknown, unknown>
  readonly trace: Trace
}

/** One subject's interpreter for one vector: how a call step runs, and what the policy's state is. */
interface Driver {
  readonly start: (step: CallStep, call: Trace) => Effect.Effect<unknown, unknown>
  readonly state: Effect.Effect<Record<string, unknown>>
}

type Fields = { readonly [field: string]: Json }
const fields = (json: Json | undefined): Fields => (json ?? {}) as Fields
const num = (json: Json | undefined): number | undefined => typeof json === "number" ? json : undefined

const now = Clock.currentTimeMillis
const sleepThen = <A, E>(takes: Json | undefined, effect: Effect.Effect<A, E>) => {
  const millis = num(takes) ?? 0
  return millis > 0 ? Effect.andThen(Effect.sleep(Duration.millis(millis)), effect) : effect
}

const schedule = (spec: Json | undefined): Schedule.Schedule<Duration.Duration> => {
  const [kind, bounds] = Object.entries(fields(spec))[0]!
  const options = { base: num(fields(bounds).base)!, cap: num(fields(bounds).cap)! }
  switch (kind) {
    case "exponential":
      return Backoff.exponential(options)
    case "fullJitter":
      return Backoff.fullJitter(options)
    case "equalJitter":
      return Backoff.equalJitter(options)
    case "decorrelatedJitter":
      return Backoff.decorrelatedJitter(options)
    default:
      throw new Error(`no backoff schedule ${kind}`)
  }
}

const budgetOf = (spec: Json | undefined) => {
  const o = fields(spec)
  return spec === undefined
    ? undefined
    : RetryBudget.unsafeMake({ maxTokens: num(o.maxTokens)!, tokenRatio: num(o.tokenRatio)! })
}

const tokensOf = (budget: RetryBudget.Budget | undefined) =>
  budget === undefined ? Effect.succeed({}) : Effect.map(budget.tokens, (tokens) => ({ tokens }))

const drivers: Record<Subject, (policy: Fields) => Effect.Effect<Driver, never, any>> = {
  backoff: (policy) =>
    Effect.succeed({
      start: (step, call) =>
        Effect.gen(function*() {
          const delays = yield* scheduleOutputs(schedule(policy), num(step.delays)!)
          call.delays.push(...delays.map(Duration.toMillis))
        }),
      state: Effect.succeed({})
    }),

  retry: (policy) => {
    const budget = budgetOf(policy.budget)
    const maxRetryAfter = num(policy.maxRetryAfter)
    const retry = Retry.retry({
      schedule: schedule(policy.schedule),
      maxAttempts: num(policy.maxAttempts)!,
      ...(maxRetryAfter === undefined ? {} : { maxRetryAfter }),
      ...(budget === undefined ? {} : { budget })
    })
    return Effect.succeed({
      start: (step, call) => {
        const attempts = (step.attempts ?? []) as ReadonlyArray<Fields>
        const attempt = Effect.flatMap(
          now,
          (at): Effect.Effect<Json, Failure.Retryable<Json> | Failure.Fatal<Json>> => {
            const spec = attempts[call.starts.length] ?? { succeed: "ok" }
            call.starts.push(at)
            const retryAfter = num(spec.retryAfter)
            const result: Effect.Effect<Json, Failure.Retryable<Json> | Failure.Fatal<Json>> =
              spec.retryable !== undefined
                ? Effect.fail(
                  Failure.retryable(spec.retryable, retryAfter === undefined ? undefined : Duration.millis(retryAfter))
                )
                : spec.fatal !== undefined
                ? Effect.fail(Failure.fatal(spec.fatal))
                : Effect.succeed(spec.succeed ?? null)
            return sleepThen(spec.takes, result)
          }
        )
        const within = num(step.within)
        return within === undefined ? retry(attempt) : Deadline.within(retry(attempt), within)
      },
      state: tokensOf(budget)
    })
  },

  deadline: () =>
    Effect.succeed({
      start: (step, call) => {
        const work = fields(step.work)
        let effect: Effect.Effect<Json, unknown> = Effect.suspend(() => {
          call.ran = true
          if (work.never === true) return Effect.never
          if (work.remaining === true) {
            return Effect.map(Deadline.remaining, Option.match({ onNone: () => null, onSome: Duration.toMillis }))
          }
          return sleepThen(
            work.takes,
            work.fail !== undefined ? Effect.fail(work.fail) : Effect.succeed(work.succeed ?? null)
          )
        })
        for (const wrap of [...((step.wrap ?? []) as ReadonlyArray<Fields>)].reverse()) {
          if (wrap.within !== undefined) effect = Deadline.within(effect, num(wrap.within)!)
          else if (wrap.deadlineAt !== undefined) effect = Deadline.withDeadlineAt(effect, num(wrap.deadlineAt)!)
          else if (wrap.timeout !== undefined) effect = Deadline.timeout(effect, num(wrap.timeout)!)
          else if (wrap.after !== undefined) effect = sleepThen(wrap.after, effect)
          else throw new Error(`no deadline wrapper ${JSON.stringify(wrap)}`)
        }
        return effect
      },
      state: Effect.succeed({})
    }),

  bulkhead: (policy) =>
    Effect.map(
      Bulkhead.make(policy as unknown as Bulkhead.Options),
      (bulkhead): Driver => ({
        start: (step, call) =>
          bulkhead.protect(Effect.flatMap(now, (at) => {
            call.starts.push(at)
            call.ran = true
            return step.takes === undefined ? Effect.never : sleepThen(step.takes, Effect.succeed(step.call))
          })),
        state: Effect.map(bulkhead.stats, (stats) => ({ ...stats }))
      })
    ),

  hedge: (policy) => {
    const budget = budgetOf(policy.budget)
    const hedge = Hedge.hedge({
      delay: num(policy.delay)!,
      maxAttempts: num(policy.maxAttempts)!,
      ...(budget === undefined ? {} : { budget })
    })
    return Effect.succeed({
      start: (step, call) => {
        const copies = (step.copies ?? []) as ReadonlyArray<Fields>
        const copy = Effect.flatMap(now, (at) => {
          const n = call.starts.push(at)
          const spec = copies[n - 1]
          const behaviour: Effect.Effect<Json, Json> = spec === undefined
            ? Effect.never
            : sleepThen(
              spec.takes,
              spec.fail !== undefined ? Effect.fail(spec.fail) : Effect.succeed(spec.succeed ?? null)
            )
          return Effect.onInterrupt(behaviour, () => Effect.sync(() => call.interrupted.push(n)))
        })
        return hedge(copy)
      },
      state: tokensOf(budget)
    })
  },

  rateLimiter: (policy) =>
    Effect.gen(function*() {
      // no background sweep: its timer would tie with the calls' (state evicts explicitly, at the clock's time)
      const store = yield* RateLimiterStore.makeMemory({ sweepInterval: Duration.infinity })
      const maxWait = num(policy.maxWait)
      const common = maxWait === undefined ? {} : { maxWait }
      const window = (spec: Json | undefined) => ({
        limit: num(fields(spec).limit)!,
        window: num(fields(spec).window)!
      })
      const make = policy.tokenBucket !== undefined
        ? RateLimiter.tokenBucket({
          capacity: num(fields(policy.tokenBucket).capacity)!,
          refillPerSecond: num(fields(policy.tokenBucket).refillPerSecond)!,
          ...common
        })
        : policy.fixedWindow !== undefined
        ? RateLimiter.fixedWindow({ ...window(policy.fixedWindow), ...common })
        : RateLimiter.slidingWindow({ ...window(policy.slidingWindow), ...common })
      const limiter = yield* Effect.provideService(make, RateLimiterStore.RateLimiterStore, store)
      return {
        start: (step) => {
          const key = step.key as string
          const cost = num(step.cost) ?? 1
          if (step.acquire !== true) return limiter.tryAcquire(key, cost)
          const own = num(step.maxWait)
          const acquire = limiter.acquire(key, cost, own === undefined ? undefined : { maxWait: own })
          const within = num(step.within)
          return within === undefined ? acquire : Deadline.within(acquire, within)
        },
        state: Effect.andThen(store.evictExpired, Effect.sync(() => ({ keys: store.unsafeSize() })))
      }
    }),

  throttle: (policy) =>
    Effect.map(AdaptiveThrottle.make(policy as unknown as AdaptiveThrottle.Options), (throttle): Driver => {
      const keys = new Set<string>()
      return {
        start: (step, call) => {
          const key = step.key as string
          keys.add(key)
          const work = Effect.suspend(() => {
            call.ran = true
            return sleepThen(step.takes, step.outcome === "accept" ? Effect.succeed("ok") : Effect.fail("503"))
          })
          return throttle.protect(work, key)
        },
        state: Effect.suspend(() =>
          Effect.map(
            Effect.forEach([...keys], (key) => Effect.map(throttle.probability(key), (p) => [key, p] as const)),
            (entries) => ({ probability: Object.fromEntries(entries) })
          )
        )
      }
    })
}

/**
 * A value as the vectors write it: durations as milliseconds, errors as their own fields (an error's `cause` is
 * not enumerable), the stack left out.
 */
const plain = (value: unknown): unknown => {
  if (Duration.isDuration(value)) return Duration.toMillis(value)
  if (typeof value !== "object" || value === null) return value
  const out: Record<string, unknown> = {}
  for (const key of Object.getOwnPropertyNames(value)) {
    if (key !== "stack") out[key] = plain((value as Record<string, unknown>)[key])
  }
  return out
}

const exitOf = (exit: Exit.Exit<unknown, unknown> | undefined): unknown => {
  if (exit === undefined) return "pending"
  if (Exit.isSuccess(exit)) return { succeed: plain(exit.value) }
  if (interruptedOnlyOf(exit)) return "interrupted"
  const error = errorOf(exit)
  return Option.isSome(error) ? { fail: plain(error.value) } : { die: String(Cause.squash(exit.cause)) }
}

const observe = (name: string, call: Call | undefined, wanted: Outcome) => {
  if (call === undefined) throw new Error(`no call ${name}`)
  const actual: Record<string, unknown> = {}
  if (wanted.exit !== undefined) actual.exit = exitOf(pollUnsafe(call.fiber))
  if (wanted.starts !== undefined) actual.starts = call.trace.starts
  if (wanted.interrupted !== undefined) actual.interrupted = [...call.trace.interrupted].sort((a, b) => a - b)
  if (wanted.delays !== undefined) actual.delays = call.trace.delays
  if (wanted.ran !== undefined) actual.ran = call.trace.ran
  expect(actual, `call ${name}`).toMatchObject(wanted)
}

/** Lets every fiber run until it waits. */
const settle = Effect.repeat(yieldNow, { times: 20 })

const run = (subject: Subject, vector: Vector) =>
  Effect.gen(function*() {
    if (vector.startAt !== undefined) yield* TestClock.setTime(vector.startAt)
    const driver = yield* drivers[subject](vector.policy)
    const calls = new Map<string, Call>()
    for (const step of vector.steps as ReadonlyArray<Step & Record<string, unknown>>) {
      if ("call" in step) {
        const trace: Trace = { starts: [], interrupted: [], delays: [], ran: false }
        calls.set(step.call as string, { fiber: yield* fork(driver.start(step as CallStep, trace)), trace })
      } else if ("advance" in step) {
        yield* TestClock.adjust(Duration.millis(step.advance as number))
      } else if ("interrupt" in step) {
        yield* Fiber.interrupt(calls.get(step.interrupt as string)!.fiber)
      } else if ("expect" in step) {
        for (const [name, wanted] of Object.entries(step.expect as Record<string, Outcome>)) {
          observe(name, calls.get(name), wanted)
        }
      } else if ("expectState" in step) {
        expect(yield* driver.state).toMatchObject(step.expectState as object)
      }
      yield* settle
    }
  }).pipe(vector.random === undefined ? (effect) => effect : withRandom(vector.random))

for (const subject of subjects) {
  describe(`vectors: ${subject}`, () => {
    for (const vector of load(subject).vectors) scoped(vector.name, () => run(subject, vector))
  })
}

// the loader of the format
describe("vectors: the format", () => {
  it("refuses a malformed file, naming what is wrong", () => {
    const vector = { name: "v", policy: {}, steps: [{ call: "a" }, { expect: { a: { exit: "pending" } } }] }
    const file = (vectors: ReadonlyArray<unknown>) => ({ subject: "hedge", description: "d", vectors })
    expect(problem("hedge", file([vector]))).toBeUndefined()
    expect(problem("retry", file([vector]))).toMatch(/subject is hedge/)
    expect(problem("hedge", file([]))).toMatch(/no vectors/)
    expect(problem("hedge", file([vector, vector]))).toMatch(/two vectors named "v"/)
    expect(problem("hedge", file([{ ...vector, steps: [{ call: "a" }] }]))).toMatch(/expects nothing/)
    expect(problem("hedge", file([{ ...vector, steps: [{ call: "a", advance: 1 }] }]))).toMatch(/exactly one of/)
    expect(problem("hedge", file([{ name: "v", steps: vector.steps }]))).toMatch(/no policy/)
  })
})
