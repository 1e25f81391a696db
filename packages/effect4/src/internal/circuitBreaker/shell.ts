/**
 * The Effect side every breaker shares, the local one (`local.ts`) and the fleet one (`redis.ts`, whose local
 * fallback runs on the fleet breaker's own shell): the state callers see and its transitions (gauge, counter,
 * `changes`, `subscribe`, `onTransition`), the one timer, rejections (counter, span, `CircuitOpen`), the
 * classification of a finished call, and the success-and-failure frame of closed calls, shared by every call of
 * one closed period.
 */
import * as Machine from "@effect-resilience/core/breaker"
import type { Cause, Fiber, Metric, Scope } from "effect"
import { Clock, Context, Duration, Effect, PubSub, Stream } from "effect"
import type { State, Transition } from "../../CircuitBreaker.js"
import { monotonicMillis } from "../clock.js"
import { counterWith, gaugeWith } from "../metrics.js"
import { event } from "../trace.js"
import { type CircuitOpen, circuitOpen } from "./errors.js"
import { rejections, stateGauge, transitions } from "./metrics.js"
import type { Config } from "./policy.js"

/**
 * What a breaker takes from the fiber that builds it: its clock, and its context, for timers, schedules and
 * metrics (Effect 4 keeps metrics in the context's `MetricRegistry`: every update of one breaker goes to the
 * registry of the context it was built in).
 */
export interface Env {
  readonly clock: Clock.Clock
  readonly context: Context.Context<never>
}

export const env: Effect.Effect<Env> = Effect.map(
  Effect.context<never>(),
  (context) => ({ clock: Context.get(context, Clock.Clock), context })
)

export const retryAfterOf = (millis: number): Duration.Duration =>
  millis === 0 ? Duration.zero : millis === Infinity ? Duration.infinity : Duration.millis(millis)

/** A failure that opened a breaker: the typed failure or the defect (`CircuitOpen.lastFailure`). */
export interface Failure {
  readonly error: unknown
}

/**
 * What a finished call meant for a breaker (`classify`), and of the last call it classified as a failure, what
 * that failure asked for through `openForAtLeast`, in milliseconds (`asked`, 0 for nothing usable), and the
 * failure itself (`failure`: the typed failure or the defect). One per breaker: both are read right after
 * `classify`, in the same synchronous step.
 */
export interface Classifier {
  readonly classify: (cause: Cause.Cause<unknown>) => Machine.Outcome
  readonly asked: number
  readonly failure: unknown
}

/**
 * A failure that says what it means for the breaker, whatever `isFailure` and `isIgnored` say: what the bridge to
 * Effect 4's own breaker service (`CircuitBreaker/Persistence`) runs a call as once Effect's `classify` judged it.
 */
export interface Verdict {
  readonly [VerdictTypeId]: true
  readonly outcome: Machine.Outcome
  /** What `openForAtLeast` would have said, in milliseconds (0: nothing). */
  readonly askedMillis: number
}

export const VerdictTypeId: unique symbol = Symbol.for("effect-resilience/CircuitBreaker/Verdict")

const verdictOf = (u: unknown): Verdict | undefined =>
  typeof u === "object" && u !== null && VerdictTypeId in u ? u as Verdict : undefined

export const makeClassifier = (config: Config): Classifier => {
  const { isFailure, isIgnored, openForAtLeast } = config
  const c = {
    asked: 0,
    failure: undefined as unknown,
    classify: (cause: Cause.Cause<unknown>): Machine.Outcome => {
      // a Cause is a flat list of reasons: the first defect, else the first typed failure; only
      // interruptions: ignored
      let fail: { readonly error: unknown } | undefined
      for (const reason of cause.reasons) {
        if (reason._tag === "Die") {
          c.asked = 0
          c.failure = reason.defect
          return "failure"
        }
        if (reason._tag === "Fail" && fail === undefined) fail = reason
      }
      c.asked = 0
      if (fail === undefined) return "ignored"
      const error = fail.error
      const verdict = verdictOf(error)
      if (verdict !== undefined) {
        if (verdict.outcome !== "failure") return verdict.outcome
        c.failure = error
        c.asked = verdict.askedMillis
        return "failure"
      }
      if (isIgnored !== undefined && isIgnored(error)) return "ignored"
      if (!isFailure(error)) return "success"
      c.failure = error
      if (openForAtLeast !== undefined) {
        const asked = openForAtLeast(error)
        const millis = asked === undefined ? 0 : Duration.toMillis(asked)
        c.asked = millis > 0 && Number.isFinite(millis) ? millis : 0
      }
      return "failure"
    }
  }
  return c
}

/**
 * Runs `onTransition`, if given, for every transition published on `hub`, in a fiber of the current scope;
 * its failures are logged, never the breaker's. Subscribes before returning, so no transition is missed.
 */
const forkOnTransition = (
  hub: PubSub.PubSub<Transition>,
  onTransition: ((transition: Transition) => Effect.Effect<void>) | undefined
): Effect.Effect<void, never, Scope.Scope> =>
  onTransition === undefined ?
    Effect.void :
    Effect.flatMap(PubSub.subscribe(hub), (subscription) =>
      PubSub.take(subscription).pipe(
        Effect.flatMap((t) =>
          Effect.catchCause(
            Effect.suspend(() => onTransition(t)),
            (cause) => Effect.logWarning("circuit breaker: onTransition failed", cause)
          )
        ),
        Effect.forever,
        Effect.interruptible,
        Effect.forkScoped,
        Effect.asVoid
      ))

/** Sets an attribute on the current span, if any (cheap in Effect 4 when there is none), to `value()` then. */
const annotate = (key: string, value: () => unknown): Effect.Effect<void> =>
  Effect.suspend(() => Effect.annotateCurrentSpan(key, value()))

const handlers = <A, E, B, E2>(
  onSuccess: (a: A) => Effect.Effect<B, E2>,
  onFailure: (cause: Cause.Cause<E>) => Effect.Effect<B, E2>
) => ({ onSuccess, onFailure })

interface ClosedHandlers {
  readonly onSuccess: (a: unknown) => Effect.Effect<unknown, unknown>
  readonly onFailure: (cause: Cause.Cause<unknown>) => Effect.Effect<unknown, unknown>
}

/** Feeds a finished call's outcome to a breaker; true when that changed its state. */
export type Record = (outcome: Machine.Outcome) => boolean

/** Records a closed call admitted in period `period`, started at `startedAt` (0 without a slow-call rule). */
export type RecordClosed = (period: number, outcome: Machine.Outcome, startedAt: number) => boolean

export class Shell {
  readonly classifier: Classifier
  readonly changes: Stream.Stream<Transition>
  readonly subscribe: Effect.Effect<PubSub.Subscription<Transition>, never, Scope.Scope>
  private current: State
  private timer: Fiber.Fiber<void> | undefined
  private isDisposed = false
  private readonly reports: boolean
  // the attribute says the state the call left (or met); the event says the move, with the breaker's labels
  private readonly annotateTransition = Effect.andThen(
    annotate("circuit_breaker.transition", () => this.current),
    event("CircuitBreaker.transition", () => ({
      ...this.config.attributes,
      "circuit_breaker.from": this.lastFrom,
      "circuit_breaker.to": this.current
    }))
  )
  private readonly annotateRejection = Effect.andThen(
    annotate("circuit_breaker.rejected", () => this.current),
    event("CircuitBreaker.rejected", () => ({ ...this.config.attributes, "circuit_breaker.state": this.current }))
  )
  /** The state the last transition left. */
  private lastFrom: State = "closed"
  // the handlers shared by the closed calls of one period (and one record), built by the first of them
  private cached: ClosedHandlers | undefined
  private cachedPeriod = -1
  private cachedRecord: RecordClosed | undefined
  // the metric series, built once: an update names no attributes
  private readonly gauge: Metric.Gauge<number>
  private readonly rejected: Metric.Counter<number>
  private readonly moves = new Map<string, Metric.Counter<number>>()

  constructor(
    readonly config: Config,
    readonly env: Env,
    private readonly hub: PubSub.PubSub<Transition>,
    initial: State,
    time: Time
  ) {
    this.classifier = makeClassifier(config)
    this.changes = Stream.fromPubSub(hub)
    this.subscribe = PubSub.subscribe(hub)
    this.current = initial
    this.reports = config.gauge !== "off"
    this.gauge = gaugeWith(stateGauge, config.attributes)
    this.rejected = counterWith(rejections, config.attributes)
    const clock = env.clock
    if (time === "shared") {
      this.now = () => clock.currentTimeMillisUnsafe()
    } else {
      const anchor = clock.currentTimeMillisUnsafe() - monotonicMillis(clock)
      this.now = () => anchor + monotonicMillis(clock)
    }
  }

  /**
   * The breaker's time, in epoch milliseconds (see {@link Time}): every instant of its machine, window, snapshots
   * and transitions.
   */
  readonly now: () => number

  /** The state callers see, the one transitions are reported from. */
  shown(): State {
    return this.current
  }

  /** The scope closed: nothing reports or arms any more. */
  disposed(): boolean {
    return this.isDisposed
  }

  /** Writes the shown state to the gauge again (see the keyed registry). */
  readonly publish = (): void => {
    if (this.reports && !this.isDisposed) this.gauge.updateUnsafe(Machine.gaugeValue(this.current), this.env.context)
  }

  private move(from: State, to: State): Metric.Counter<number> {
    const name = `${from}>${to}`
    let counter = this.moves.get(name)
    if (counter === undefined) {
      counter = counterWith(transitions, { ...this.config.attributes, from, to })
      this.moves.set(name, counter)
    }
    return counter
  }

  /** Shows `to` from `at`: a change is a transition (gauge, counter, `changes`, `onTransition`). */
  show(to: State, at: number): void {
    const from = this.current
    if (from === to) return
    this.lastFrom = from
    this.current = to
    this.publish()
    this.move(from, to).updateUnsafe(1, this.env.context)
    PubSub.publishUnsafe(this.hub, { from, to, at })
  }

  cancelTimer(): void {
    if (this.timer !== undefined) {
      this.timer.interruptUnsafe()
      this.timer = undefined
    }
  }

  /** Runs `onFire` after `delayMillis` of the breaker's `Clock`, instead of what was armed before. */
  arm(delayMillis: number, onFire: () => void): void {
    this.cancelTimer()
    if (this.isDisposed) return
    // the timer fiber runs in the breaker's context (its clock); it starts on this stack up to its sleep
    this.timer = Effect.runForkWith(this.env.context)(
      Effect.andThen(
        this.env.clock.sleep(Duration.millis(delayMillis)),
        Effect.sync(() => {
          this.timer = undefined
          onFire()
        })
      )
    )
  }

  /** Refuses a call: `CircuitOpen` with `retryAfterMillis` and, when known, the failure that opened it. */
  reject(retryAfterMillis: number, opened: Failure | undefined): Effect.Effect<never, CircuitOpen> {
    this.rejected.updateUnsafe(1, this.env.context)
    return Effect.andThen(
      this.annotateRejection,
      Effect.fail(circuitOpen(retryAfterOf(retryAfterMillis), opened))
    )
  }

  /** The failure the call just classified opened the breaker (else `undefined`: nothing failed). */
  openedBy(outcome: Machine.Outcome): Failure | undefined {
    return outcome === "failure" ? { error: this.classifier.failure } : undefined
  }

  /**
   * Runs `self` and feeds its outcome to `record`, annotating the span when that changed the state. The
   * handlers are arrows in argument position on purpose: loaders that keep function names (tsx, esbuild's
   * keepNames) wrap every *named* closure in a costly `__name` call.
   */
  observe<A, E, R>(self: Effect.Effect<A, E, R>, record: Record): Effect.Effect<A, E, R> {
    const { annotateTransition, classifier } = this
    return Effect.matchCauseEffect(
      self,
      handlers(
        (a: A) => record("success") ? Effect.andThen(annotateTransition, Effect.succeed(a)) : Effect.succeed(a),
        (cause: Cause.Cause<E>) =>
          record(classifier.classify(cause))
            ? Effect.andThen(annotateTransition, Effect.failCause(cause))
            : Effect.failCause(cause)
      )
    )
  }

  // The closed path without a slow-call rule needs no per-call state: the calls of one closed period share
  // handlers, replaced in the next period (or for another breaker's record: a fleet breaker's fallback).
  private closedHandlers(period: number, record: RecordClosed): ClosedHandlers {
    if (this.cached !== undefined && this.cachedPeriod === period && this.cachedRecord === record) return this.cached
    const { annotateTransition, classifier } = this
    this.cachedPeriod = period
    this.cachedRecord = record
    return this.cached = handlers(
      (a: unknown) =>
        record(period, "success", 0) ? Effect.andThen(annotateTransition, Effect.succeed(a)) : Effect.succeed(a),
      (cause: Cause.Cause<unknown>) =>
        record(period, classifier.classify(cause), 0)
          ? Effect.andThen(annotateTransition, Effect.failCause(cause))
          : Effect.failCause(cause)
    )
  }

  /** Runs a closed call of `period`: one frame shared by the period's calls unless a slow-call rule times them. */
  runClosed<A, E, R>(self: Effect.Effect<A, E, R>, period: number, record: RecordClosed): Effect.Effect<A, E, R> {
    if (this.config.slowMillis === undefined) {
      return Effect.matchCauseEffect(self, this.closedHandlers(period, record)) as Effect.Effect<A, E, R>
    }
    const startedAt = this.now()
    return this.observe(self, (outcome) => record(period, outcome, startedAt))
  }

  /** What the scope's finalizer does: the timer stops, the transitions end. */
  readonly dispose: Effect.Effect<void> = Effect.suspend(() => {
    // a keyed breaker's series outlives it (Effect's registry keeps every label set): leave it closed
    if (this.config.gauge === "release" && !this.isDisposed) {
      this.gauge.updateUnsafe(Machine.gaugeValue("closed"), this.env.context)
    }
    this.isDisposed = true
    const t = this.timer
    this.timer = undefined
    t?.interruptUnsafe()
    return PubSub.shutdown(this.hub)
  })
}

/**
 * Which time a breaker keeps. `"shared"`, the fleet breaker's: the wall clock, as the instants the other processes
 * write to Redis are. `"local"`: the monotonic reading of the `Clock` (`internal/clock.ts`), anchored to the wall
 * clock when the breaker is built, so its openings, windows and timeouts, which live in this process, do not move
 * when the wall clock steps; its snapshots and transitions are epoch milliseconds as of the build (a snapshot
 * taken after a step of `d` is `d` off the new wall clock).
 */
export type Time = "local" | "shared"

/**
 * Builds a shell in the current scope, showing `initial` (a restored snapshot's state: no transition); its
 * finalizer stops the timer and ends the transitions.
 */
export const make = (
  config: Config,
  e: Env,
  initial: State = "closed",
  time: Time = "local"
): Effect.Effect<Shell, never, Scope.Scope> =>
  Effect.gen(function*() {
    const hub = yield* PubSub.unbounded<Transition>()
    const shell = new Shell(config, e, hub, initial, time)
    shell.publish()
    // subscribed before the breaker is returned, so no transition can be missed
    yield* forkOnTransition(hub, config.onTransition)
    yield* Effect.addFinalizer(() => shell.dispose)
    return shell
  })
