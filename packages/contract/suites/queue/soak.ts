/**
 * The at-least-once soak shared by every source: `n` messages, a seeded fraction of them poison (some fail
 * `Fatal`, some die on every delivery), random `Retryable` failures, plain failures on the first delivery,
 * and crashes — the handler's effect committed, then the delivery interrupted before the ack.
 *
 * What must hold afterwards: every good message's effect applied exactly once, every poison message in
 * the dead-letter queue (with no effect), `in = processed + dead-lettered`, nothing left in the source.
 */
import { type DurationInput, provideScope } from "#edition"
import { expect } from "@effect/vitest"
import type { Scope } from "effect"
import { Effect, Exit, Option, Scope as ScopeM } from "effect"
import { Backoff, Consumer, Failure, type QueueSource } from "effect-resilience"

export interface Body {
  readonly n: number
}

export type Kind = "good" | "fatal" | "defect"

export interface Plan {
  readonly kind: Kind
  /** Retryable failures at the start of the first delivery (3 = more than the retry allows). */
  readonly retryableFailures: number
  /** A plain (unclassified) failure on the first delivery: released, then redelivered. */
  readonly failFirstDelivery: boolean
  /** Interrupted after the effect, before the ack, on the first delivery. */
  readonly crashFirstDelivery: boolean
}

/** mulberry32: a tiny seeded PRNG, so every run sees the same plan. */
export const prng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

export const makePlan = (n: number, seed: number, prefix: string): Map<string, Plan> => {
  const random = prng(seed)
  const plans = new Map<string, Plan>()
  for (let i = 0; i < n; i++) {
    const r = random()
    const kind: Kind = r < 0.02 ? "fatal" : r < 0.03 ? "defect" : "good"
    const f = random()
    plans.set(`${prefix}-${i}`, {
      kind,
      retryableFailures: f < 0.1 ? 1 : f < 0.15 ? 2 : f < 0.18 ? 3 : 0,
      failFirstDelivery: random() < 0.03,
      crashFirstDelivery: random() < 0.05
    })
  }
  return plans
}

export interface SoakSetup<R> {
  readonly source: QueueSource.QueueSource<Body>
  /** Wraps a handler so a message id is applied once (SQL transaction or memory set). */
  readonly idempotent: <B, E, R2>(
    handler: (message: QueueSource.Message<Body>) => Effect.Effect<B, E, R2>
  ) => (message: QueueSource.Message<Body>) => Effect.Effect<Option.Option<B>, unknown, R2 | R>
  /** The business effect: counts one application of `id`. */
  readonly record: (id: string) => Effect.Effect<void, unknown, R>
  /** How many times each id was applied. */
  readonly effects: Effect.Effect<ReadonlyMap<string, number>, unknown, R>
  /** Messages still in the source (visible or in flight). */
  readonly remaining: Effect.Effect<number, unknown, R>
  /** Whether a poison message's write is rolled back with its failure (SQL) — then it writes first. */
  readonly transactional: boolean
}

export interface SoakOptions {
  readonly n: number
  readonly seed: number
  readonly prefix: string
  readonly concurrency: number
  readonly maxReceiveCount: number
  /** Lets time pass (TestClock.adjust, or a real sleep) and the consumer run. */
  readonly tick: Effect.Effect<void>
  readonly maxTicks: number
  /** The per-delivery deadline, if any. */
  readonly timeout?: DurationInput
}

export interface SoakResult {
  readonly n: number
  readonly good: number
  readonly poison: number
  readonly processed: number
  readonly deadLettered: number
  readonly appliedOnce: number
  readonly crashes: number
  readonly ticks: number
}

export const runSoak = <R>(setup: SoakSetup<R>, options: SoakOptions): Effect.Effect<SoakResult, unknown, R> =>
  Effect.gen(function*() {
    const plans = makePlan(options.n, options.seed, options.prefix)
    const attempts = new Map<string, number>()
    // a message's first delivery, by its receipt: a delivery lost with its handler (a crash) gives its receive back,
    // so the receive count does not tell a redelivery (core/crashAttribution.ts)
    const firstReceipt = new Map<string, string>()
    const isFirst = (message: QueueSource.Message<Body>) => {
      if (!firstReceipt.has(message.id)) firstReceipt.set(message.id, message.receipt)
      return firstReceipt.get(message.id) === message.receipt
    }
    let crashes = 0

    const inner = (message: QueueSource.Message<Body>) =>
      Effect.gen(function*() {
        const plan = plans.get(message.id)!
        if (plan.kind === "defect") return yield* Effect.die(new Error(`cannot parse message ${message.id}`))
        if (plan.kind === "fatal") {
          if (setup.transactional) yield* setup.record(message.id) // rolled back with the failure
          return yield* Effect.fail(Failure.fatal(`invalid message ${message.id}`))
        }
        if (isFirst(message)) {
          const attempt = (attempts.get(message.id) ?? 0) + 1
          attempts.set(message.id, attempt)
          if (attempt <= plan.retryableFailures) return yield* Effect.fail(Failure.retryable("busy"))
          if (plan.failFirstDelivery) return yield* Effect.fail({ _tag: "Flaky" as const })
        }
        yield* setup.record(message.id)
      })

    const once = setup.idempotent(inner)
    const handler = (message: QueueSource.Message<Body>) =>
      Effect.flatMap(once(message), () => {
        const plan = plans.get(message.id)!
        if (plan.crashFirstDelivery && isFirst(message)) {
          crashes++
          return Effect.interrupt // the effect is durable; the process "dies" before the ack
        }
        return Effect.void
      })

    const messages = [...plans.keys()].map((id, i) => ({ id, body: { n: i } }))
    yield* setup.source.send(messages)

    const scope = yield* ScopeM.make()
    const consumer = yield* Consumer.run({
      source: setup.source,
      handler,
      concurrency: options.concurrency,
      maxReceiveCount: options.maxReceiveCount,
      retry: { schedule: Backoff.exponential({ base: "5 millis", cap: "20 millis" }), maxAttempts: 3 },
      // (each timed delivery arms a timer: under TestClock they pile up until their time passes)
      ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
      bufferSize: options.concurrency * 2,
      pollInterval: "20 millis"
    }).pipe(provideScope(scope))

    let ticks = 0
    for (;;) {
      const stats = yield* consumer.stats
      if (stats.processed + stats.deadLettered >= options.n) break
      if (++ticks > options.maxTicks) {
        return yield* Effect.die(new Error(`soak did not finish: ${JSON.stringify(stats)}`))
      }
      yield* options.tick
    }
    yield* ScopeM.close(scope, Exit.void)
    const stats = yield* consumer.stats

    const good = [...plans].filter(([, p]) => p.kind === "good").map(([id]) => id)
    const poison = [...plans].filter(([, p]) => p.kind !== "good").map(([id]) => id)
    const effects = yield* setup.effects
    const appliedOnce = good.filter((id) => effects.get(id) === 1).length
    const wrong = good.filter((id) => effects.get(id) !== 1).slice(0, 5).map((id) => [id, effects.get(id)])
    expect(wrong, "good messages applied other than exactly once").toEqual([])
    expect(appliedOnce).toBe(good.length)
    expect(poison.filter((id) => (effects.get(id) ?? 0) !== 0), "poison messages must have no effect").toEqual([])

    const dead = yield* setup.source.deadLetters.list({ limit: options.n })
    const deadIds = new Set(dead.map((d) => d.id))
    expect(poison.filter((id) => !deadIds.has(id)), "poison messages missing from the DLQ").toEqual([])
    expect(dead.filter((d) => plans.get(d.id)?.kind === "good").map((d) => [d.id, d.reason])).toEqual([])
    for (const entry of dead) {
      const plan = plans.get(entry.id)!
      if (plan.kind === "fatal") {
        expect(entry.reason).toContain("Fatal")
        expect(entry.receiveCount).toBe(1)
      } else {
        expect(entry.reason).toContain(`received ${options.maxReceiveCount} times`)
        expect(entry.reason).toContain("cannot parse")
        expect(entry.receiveCount).toBe(options.maxReceiveCount)
      }
      expect(entry.lastSeenAt).toBeGreaterThanOrEqual(entry.firstSeenAt)
    }
    expect(yield* setup.source.deadLetters.depth).toBe(poison.length)

    // in = processed + dead-lettered, and nothing is left behind
    expect(stats.processed + stats.deadLettered).toBe(options.n)
    expect(stats.processed).toBe(good.length)
    expect(stats.deadLettered).toBe(poison.length)
    expect(yield* setup.remaining).toBe(0)
    expect(crashes).toBeGreaterThan(0)
    expect(stats.abandoned).toBe(crashes)

    return {
      n: options.n,
      good: good.length,
      poison: poison.length,
      processed: stats.processed,
      deadLettered: stats.deadLettered,
      appliedOnce,
      crashes,
      ticks
    }
  })

/** Runs `effect` in a fresh scope that is closed afterwards. */
export const scoped = <A, E, R>(effect: Effect.Effect<A, E, R | Scope.Scope>) => Effect.scoped(effect)
